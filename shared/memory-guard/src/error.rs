//! The crate's single error type.
//!
//! Every message is a fixed string: a rejected memoryRef may be attacker input (CTI-1 §3, errors
//! don't leak) and a rejected secret must never reach a log line (SR-1), so no variant carries or
//! echoes the offending text.

/// Why a memoryRef, id or secret registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum GuardError {
    /// The memoryRef is not exactly `workspaces/{tenantId}/agents/{agentId}/memories`.
    #[error("malformed memoryRef")]
    MalformedRef,
    /// A tenant or agent id is outside `[A-Za-z0-9._-]{1,128}` or is `.` / `..`.
    #[error("invalid tenant or agent id")]
    InvalidId,
    /// A secret id is outside `[A-Za-z0-9._:/@-]{1,128}`, so its marker would not parse back.
    #[error("invalid secret id")]
    InvalidSecretId,
    /// A secret value is larger than [`crate::MAX_SECRET_BYTES`].
    #[error("secret value too long")]
    SecretTooLong,
    /// More than `u32::MAX` values registered in one registry.
    #[error("too many secrets")]
    TooManySecrets,
}
