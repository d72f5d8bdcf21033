//! Memory grants (OAP RFC 0010 §3.4): a granter's signed authorization for one grantee to read
//! one slice of one memoryRef. The grant is the bearer token (§3.5); the host keeps only a record
//! of it (its hash, its slice, its revocation), so a grant cannot be widened by editing it and
//! the record holds no clear subject identifier for forget to chase.
//!
//! Choices where the RFC is silent (docs/oap.md "Grants"):
//! - `scope_id` is the memoryRef the slice is cut from; the granter's tenant comes from its
//!   token, and a ref of another tenant is refused as malformed.
//! - The slice is fixed when the grant is issued: the newest `max_items` items the filter
//!   admits at that moment. Items written later are outside it; items deleted or forgotten
//!   later leave it. So `max_items` bounds what a grantee can ever read, over any number of
//!   queries, by construction rather than by a counter.
//! - `scopes` names what the grantee may read: `items` always, `embeddings` only when asked
//!   (§5.2: never by default).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::canonical::hash_of;
use crate::error::ExchangeError;
use crate::item::Kind;
use crate::signing::HostKey;
use memory_core::{SubjectKey, TenantId, Timestamp};

/// §3.7: the longest a grant may live.
pub const MAX_GRANT_DURATION_DAYS: i64 = 180;
/// §3.3 / §3.7: the most items one grant may cover.
pub const MAX_GRANT_SIZE_ITEMS: u32 = 10_000;
/// The projection profiles this host applies (docs/projection.md).
pub const SUPPORTED_PROFILES: &[&str] = &[crate::projection::CONTACT_V1];
/// What a grant may let its grantee read.
pub const SCOPE_ITEMS: &str = "items";
pub const SCOPE_EMBEDDINGS: &str = "embeddings";

const DAY_MS: i64 = 86_400_000;

/// §3.4 `filter`: every present field must admit an item.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_entity_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_after: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels_any: Vec<String>,
}

/// What the granter asks for (`POST /oap/memory/grant`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    pub grantee: String,
    pub purpose: String,
    pub scope_id: String,
    #[serde(default)]
    pub filter: Filter,
    pub max_items: u32,
    pub expires_at: String,
    #[serde(default = "yes")]
    pub revocable: bool,
    #[serde(default)]
    pub redaction_profile: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
}

fn yes() -> bool {
    true
}

/// A grant as signed and handed out. `signature` is over the canonical JSON of every other
/// field (§3.4; `oap-sdk`'s `sign_ed25519`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    pub grant_id: String,
    pub issuer: String,
    pub granter: String,
    pub grantee: String,
    pub purpose: String,
    pub scope_id: String,
    pub filter: Filter,
    pub max_items: u32,
    pub issued_at: String,
    pub expires_at: String,
    pub revocable: bool,
    pub redaction_profile: String,
    pub scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

/// The grant's parts the checks need, parsed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedFilter {
    pub subjects: Vec<(SubjectKey, String)>,
    pub kinds: Vec<Kind>,
    pub captured_after: Option<Timestamp>,
    pub labels_any: Vec<String>,
}

/// The principal DID of a tenant of this host: `did:web:<host>:tenants:<tenantId>`.
pub fn tenant_did(host_did: &str, tenant: &TenantId) -> String {
    format!("{host_did}:tenants:{}", tenant.as_str())
}

/// The tenant a granter DID of this host names.
pub fn tenant_of_granter(host_did: &str, granter: &str) -> Option<TenantId> {
    let rest = granter.strip_prefix(host_did)?.strip_prefix(":tenants:")?;
    TenantId::parse(rest).ok()
}

fn text_field(field: &str, value: &str, max: usize) -> Result<(), ExchangeError> {
    if value.trim().is_empty() || value.len() > max || value.chars().any(char::is_control) {
        return Err(ExchangeError::invalid(
            field,
            format!("1-{max} bytes of text without control characters"),
        ));
    }
    Ok(())
}

impl Filter {
    /// Checks the bounds and parses; the filter is also what the host signs, so it is first put
    /// in one order (sorted, without repeats).
    pub fn checked(&mut self, tenant: &TenantId) -> Result<CheckedFilter, ExchangeError> {
        if self.subject_entity_ids.len() > 100 || self.labels_any.len() > 32 {
            return Err(ExchangeError::invalid(
                "filter",
                "at most 100 subject_entity_ids and 32 labels_any",
            ));
        }
        for s in &self.subject_entity_ids {
            text_field("filter.subject_entity_ids", s, 256)?;
        }
        for l in &self.labels_any {
            if !memory_core::model::is_valid_tag(l) {
                return Err(ExchangeError::invalid(
                    "filter.labels_any",
                    "labels are 1-128 bytes without control characters",
                ));
            }
        }
        self.subject_entity_ids.sort();
        self.subject_entity_ids.dedup();
        self.kinds.sort();
        self.kinds.dedup();
        self.labels_any.sort();
        self.labels_any.dedup();
        let captured_after = match &self.captured_after {
            None => None,
            Some(t) => Some(Timestamp::parse_rfc3339(t).map_err(|_| {
                ExchangeError::invalid("filter.captured_after", "an RFC 3339 timestamp")
            })?),
        };
        Ok(CheckedFilter {
            subjects: self
                .subject_entity_ids
                .iter()
                .map(|s| (SubjectKey::derive(tenant, s), s.clone()))
                .collect(),
            kinds: self.kinds.clone(),
            captured_after,
            labels_any: self.labels_any.clone(),
        })
    }
}

impl CheckedFilter {
    /// Whether an item with these attributes is in the filter.
    pub fn admits(
        &self,
        subject: Option<&SubjectKey>,
        kind: Kind,
        captured_at: Timestamp,
        labels: &[String],
    ) -> bool {
        (self.subjects.is_empty()
            || subject.is_some_and(|s| self.subjects.iter().any(|(k, _)| k == s)))
            && (self.kinds.is_empty() || self.kinds.contains(&kind))
            && self.captured_after.is_none_or(|after| captured_at > after)
            && (self.labels_any.is_empty() || labels.iter().any(|l| self.labels_any.contains(l)))
    }

    /// The clear subject id the granter named for a stored subject key, if it named it.
    pub fn subject_name(&self, subject: Option<&SubjectKey>) -> Option<&str> {
        let subject = subject?;
        self.subjects
            .iter()
            .find(|(k, _)| k == subject)
            .map(|(_, name)| name.as_str())
    }
}

impl GrantRequest {
    /// Checks every bound the RFC and the manifest state, and turns the request into the grant
    /// to sign (without its signature yet).
    pub fn into_grant(
        mut self,
        host_did: &str,
        tenant: &TenantId,
        grant_id: String,
        now: Timestamp,
    ) -> Result<(Grant, CheckedFilter), ExchangeError> {
        if !self.grantee.starts_with("did:") {
            return Err(ExchangeError::invalid("grantee", "a DID (did:method:...)"));
        }
        text_field("grantee", &self.grantee, 512)?;
        text_field("purpose", &self.purpose, 1000)?;
        if memory_core::model::admitted_ref(tenant.as_str(), &self.scope_id).is_err() {
            return Err(ExchangeError::invalid(
                "scope_id",
                "a memoryRef of the caller's tenant (workspaces/{tenantId}/agents/{agentId}/memories)",
            ));
        }
        if !(1..=MAX_GRANT_SIZE_ITEMS).contains(&self.max_items) {
            return Err(ExchangeError::invalid(
                "max_items",
                format!("1 to {MAX_GRANT_SIZE_ITEMS} (max_grant_size_items)"),
            ));
        }
        let expires = Timestamp::parse_rfc3339(&self.expires_at)
            .map_err(|_| ExchangeError::invalid("expires_at", "an RFC 3339 timestamp"))?;
        if expires <= now
            || expires.as_millis() - now.as_millis() > MAX_GRANT_DURATION_DAYS * DAY_MS
        {
            return Err(ExchangeError::invalid(
                "expires_at",
                format!("in the future and at most {MAX_GRANT_DURATION_DAYS} days away (max_grant_duration_days)"),
            ));
        }
        let profile = self
            .redaction_profile
            .take()
            .unwrap_or_else(|| crate::projection::CONTACT_V1.to_owned());
        if !SUPPORTED_PROFILES.contains(&profile.as_str()) {
            return Err(ExchangeError::invalid(
                "redaction_profile",
                format!("one of {}", SUPPORTED_PROFILES.join(", ")),
            ));
        }
        let mut scopes = vec![SCOPE_ITEMS.to_owned()];
        for s in &self.scopes {
            match s.as_str() {
                SCOPE_ITEMS => {}
                SCOPE_EMBEDDINGS => scopes.push(SCOPE_EMBEDDINGS.to_owned()),
                _ => {
                    return Err(ExchangeError::invalid(
                        "scopes",
                        "items and embeddings are the scopes a grant can carry",
                    ))
                }
            }
        }
        scopes.sort();
        scopes.dedup();
        let checked = self.filter.checked(tenant)?;
        Ok((
            Grant {
                grant_id,
                issuer: host_did.to_owned(),
                granter: tenant_did(host_did, tenant),
                grantee: self.grantee,
                purpose: self.purpose,
                scope_id: self.scope_id,
                filter: self.filter,
                max_items: self.max_items,
                issued_at: now.to_rfc3339(),
                expires_at: expires.to_rfc3339(),
                revocable: self.revocable,
                redaction_profile: profile,
                scopes,
                signature: String::new(),
            },
            checked,
        ))
    }
}

impl Grant {
    /// The grant without its signature: what is signed.
    pub fn unsigned(&self) -> Value {
        let mut v = json!(self);
        if let Some(map) = v.as_object_mut() {
            map.remove("signature");
        }
        v
    }

    /// Signs the grant in place.
    pub fn sign(&mut self, key: &HostKey) {
        self.signature = key.sign(&self.unsigned());
    }

    /// The grant's identity on record: the hash of the whole signed grant.
    pub fn hash(&self) -> String {
        hash_of(&json!(self))
    }

    /// The grant a bearer token carries, if this host signed it and nothing in it changed.
    pub fn from_bearer(key: &HostKey, token: &str) -> Result<Grant, ExchangeError> {
        let payload = key.open_jws(token).ok_or(ExchangeError::GrantRefused(
            "not a grant signed by this host",
        ))?;
        let grant: Grant = serde_json::from_value(payload)
            .map_err(|_| ExchangeError::GrantRefused("not a grant signed by this host"))?;
        if grant.issuer != key.did() || !key.verifies(&grant.unsigned(), &grant.signature) {
            return Err(ExchangeError::GrantRefused(
                "not a grant signed by this host",
            ));
        }
        Ok(grant)
    }

    pub fn allows_embeddings(&self) -> bool {
        self.scopes.iter().any(|s| s == SCOPE_EMBEDDINGS)
    }
}

/// What the host keeps of a grant: enough to check a bearer against it and to bound its
/// slice, and nothing a forget would have to find (subjects are kept as tenant-scoped digests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    pub grant_id: String,
    pub tenant: TenantId,
    pub scope_id: String,
    pub grantee: String,
    pub grant_hash: String,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    pub revocable: bool,
    pub revoked_at: Option<Timestamp>,
    /// Ids of the items in the slice, fixed at issue.
    pub slice: Vec<String>,
}
