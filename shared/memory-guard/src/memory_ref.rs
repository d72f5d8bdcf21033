//! memoryRef shape validation — CTI-1 §1 of the OpenWOP agent-memory spec.
//!
//! CTI-1 requires hosts to validate the ref shape at resolution time and to answer malformed refs
//! with `[]` / `null` instead of falling through to a permissive lookup. The safest way to make
//! "malformed" unambiguous is to accept exactly one spelling and nothing else: there is no
//! decoding, trimming, case folding or normalisation step for an attacker to play against, so
//! traversal (`..`), percent tricks, NUL, look-alike code points and alternative separators all
//! fail the same byte-for-byte comparison.

use std::fmt;
use std::str::FromStr;

use crate::GuardError;

/// Upper bound on a whole memoryRef, checked before any other work so oversize input is
/// rejected in constant time.
///
/// The longest canonical ref (two 128-byte ids) is 284 bytes, so this bound never rejects a
/// well-formed ref; it exists because the design fixes it and because it caps the cost of
/// inspecting hostile input.
pub const MAX_REF_BYTES: usize = 512;

/// Longest tenant or agent id, in bytes (ids are ASCII, so also in chars).
pub const MAX_ID_BYTES: usize = 128;

const WORKSPACES: &str = "workspaces";
const AGENTS: &str = "agents";
const MEMORIES: &str = "memories";

/// Ids become storage key components, so only a small ASCII set is allowed and the two
/// path-meaningful dot forms are refused outright even though their characters are legal.
fn validate_id(raw: &str) -> Result<(), GuardError> {
    let ok = !raw.is_empty()
        && raw.len() <= MAX_ID_BYTES
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && raw != "."
        && raw != "..";
    if ok {
        Ok(())
    } else {
        Err(GuardError::InvalidId)
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Accepts `[A-Za-z0-9._-]{1,128}` except `.` and `..`; the input is never trimmed.
            pub fn parse(raw: &str) -> Result<Self, GuardError> {
                validate_id(raw)?;
                Ok(Self(raw.to_owned()))
            }

            /// The id exactly as it appears in the memoryRef.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = GuardError;

            fn from_str(raw: &str) -> Result<Self, Self::Err> {
                Self::parse(raw)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(
    /// The tenant a memoryRef belongs to; the unit of isolation in CTI-1.
    ///
    /// Holding one proves the text passed validation, so store keys can be built from it without
    /// re-checking.
    TenantId
);

id_type!(
    /// The agent whose memories a memoryRef names, scoped inside one tenant.
    AgentId
);

/// A validated memoryRef: `workspaces/{tenantId}/agents/{agentId}/memories`.
///
/// Only constructible through [`MemoryRef::parse`] or from already-validated ids, so any
/// `MemoryRef` in hand is well-formed and its tenant can be trusted for CTI-1 gating.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryRef {
    tenant: TenantId,
    agent: AgentId,
}

impl MemoryRef {
    /// Builds the ref for an agent of a tenant; cannot fail because both ids are validated.
    pub fn new(tenant: TenantId, agent: AgentId) -> Self {
        Self { tenant, agent }
    }

    /// Accepts only the exact canonical spelling; everything else is
    /// [`GuardError::MalformedRef`], whatever the reason, so callers cannot leak which rule
    /// tripped.
    pub fn parse(raw: &str) -> Result<Self, GuardError> {
        if raw.len() > MAX_REF_BYTES {
            return Err(GuardError::MalformedRef);
        }
        let mut parts = raw.split('/');
        let (Some(ws), Some(tenant), Some(ag), Some(agent), Some(mem), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(GuardError::MalformedRef);
        };
        if ws != WORKSPACES || ag != AGENTS || mem != MEMORIES {
            return Err(GuardError::MalformedRef);
        }
        let tenant = TenantId::parse(tenant).map_err(|_| GuardError::MalformedRef)?;
        let agent = AgentId::parse(agent).map_err(|_| GuardError::MalformedRef)?;
        Ok(Self { tenant, agent })
    }

    /// The tenant that owns every entry this ref can reach.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The agent inside the tenant.
    pub fn agent(&self) -> &AgentId {
        &self.agent
    }

    /// The canonical text, identical to what [`MemoryRef::parse`] accepted.
    pub fn as_string(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for MemoryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{WORKSPACES}/{}/{AGENTS}/{}/{MEMORIES}",
            self.tenant, self.agent
        )
    }
}

impl FromStr for MemoryRef {
    type Err = GuardError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl TryFrom<&str> for MemoryRef {
    type Error = GuardError;

    fn try_from(raw: &str) -> Result<Self, Self::Error> {
        Self::parse(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_canonical_ref_fits_the_byte_bound() {
        let longest = WORKSPACES.len() + AGENTS.len() + MEMORIES.len() + 4 + 2 * MAX_ID_BYTES;
        assert_eq!(longest, 284);
        assert!(longest <= MAX_REF_BYTES);
    }
}
