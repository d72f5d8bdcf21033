//! The door's API keys. The official client authenticates with `X-API-Key` and `X-Agent-ID`
//! headers, not a bearer token, so the door has its own keys: each maps to exactly one tenant
//! and the agents it may act as, has an expiry, can be revoked, and is stored only as a digest
//! (docs/openintent.md "Who is calling"). The key names its record (`oik_<keyId>_<secret>`),
//! so checking one is a single read, never a scan.

use base64::Engine;
use memory_core::time::Timestamp;
use memory_guard::{AgentId, TenantId};
use sha2::{Digest, Sha256};

use crate::model::Caller;

pub const KEY_PREFIX: &str = "oik_";
/// Bytes of randomness in a key's secret part.
pub const SECRET_BYTES: usize = 32;
/// The agent pattern that covers every agent of the tenant.
pub const ANY_AGENT: &str = "*";
/// Longest lifetime an operator may give a key.
pub const MAX_KEY_DAYS: i64 = 366;

/// What the store keeps of a key: never the key itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    pub key_id: String,
    pub tenant: TenantId,
    /// Agent ids the key may act as, or `*`.
    pub agents: Vec<String>,
    /// Hex SHA-256 of the secret part.
    pub secret_digest: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// Why a key was refused. Deliberately coarse on the wire (API Gateway answers 403 for all of
/// them); the reason is for the authorizer's own logs, which carry the key id only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Malformed,
    Unknown,
    WrongSecret,
    Expired,
    Revoked,
    AgentNotCovered,
}

impl Denied {
    pub fn as_str(self) -> &'static str {
        match self {
            Denied::Malformed => "malformed",
            Denied::Unknown => "unknown",
            Denied::WrongSecret => "wrong_secret",
            Denied::Expired => "expired",
            Denied::Revoked => "revoked",
            Denied::AgentNotCovered => "agent_not_covered",
        }
    }
}

/// A freshly issued key: the text handed to the operator once, and the record to store.
pub struct Issued {
    pub api_key: String,
    pub record: KeyRecord,
}

fn digest(secret: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"wop-memory/api-key/v1\0");
    h.update(secret);
    memory_core::model::hex(&h.finalize())
}

/// Issues a key from `random` (the caller draws it from the OS), for one tenant and agents.
pub fn issue(
    key_id: String,
    random: [u8; SECRET_BYTES],
    tenant: TenantId,
    agents: Vec<String>,
    now: Timestamp,
    days: i64,
) -> Issued {
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random);
    Issued {
        api_key: format!("{KEY_PREFIX}{key_id}_{secret}"),
        record: KeyRecord {
            key_id,
            tenant,
            agents,
            secret_digest: digest(secret.as_bytes()),
            created_at: now,
            expires_at: now.plus_millis(days.clamp(1, MAX_KEY_DAYS) * 86_400_000),
            revoked_at: None,
        },
    }
}

/// The key id a presented key names, if it has the key's shape.
pub fn key_id_of(api_key: &str) -> Option<&str> {
    let rest = api_key.strip_prefix(KEY_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let ok_id = id.len() == 26 && id.bytes().all(|b| b.is_ascii_alphanumeric());
    let ok_secret = secret.len() == 43
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (ok_id && ok_secret).then_some(id)
}

/// Equal-time comparison of two digests, so the time a refusal takes says nothing about how
/// much of a guess was right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Checks a presented key and agent against the key's record.
pub fn verify(
    record: &KeyRecord,
    api_key: &str,
    agent: &str,
    now: Timestamp,
) -> Result<Caller, Denied> {
    let id = key_id_of(api_key).ok_or(Denied::Malformed)?;
    if id != record.key_id {
        return Err(Denied::Unknown);
    }
    let secret = &api_key[KEY_PREFIX.len() + id.len() + 1..];
    if !same(&digest(secret.as_bytes()), &record.secret_digest) {
        return Err(Denied::WrongSecret);
    }
    if record.revoked_at.is_some() {
        return Err(Denied::Revoked);
    }
    if record.expires_at <= now {
        return Err(Denied::Expired);
    }
    let agent = AgentId::parse(agent).map_err(|_| Denied::AgentNotCovered)?;
    if !record
        .agents
        .iter()
        .any(|a| a == ANY_AGENT || a == agent.as_str())
    {
        return Err(Denied::AgentNotCovered);
    }
    Ok(Caller {
        tenant: record.tenant.clone(),
        agent,
    })
}

/// Where key records live (one item per key, outside every tenant's partition: the
/// authorizer reads it before it knows the tenant).
#[async_trait::async_trait]
pub trait KeyRegistry: Send + Sync {
    /// Strongly consistent, so a revocation is seen by the next check that reaches the store.
    async fn get(&self, key_id: &str) -> Result<Option<KeyRecord>, memory_core::StoreError>;
    /// Stores a new record; never overwrites one.
    async fn put(&self, record: &KeyRecord) -> Result<(), memory_core::StoreError>;
    /// Marks the key revoked; `Ok(false)`: no such key.
    async fn revoke(&self, key_id: &str, at: Timestamp) -> Result<bool, memory_core::StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(agents: &[&str]) -> Issued {
        issue(
            "01HZZZZZZZZZZZZZZZZZZZZZZZ".into(),
            [7u8; SECRET_BYTES],
            TenantId::parse("t1").expect("tenant"),
            agents.iter().map(|a| (*a).to_owned()).collect(),
            Timestamp::from_millis(1_000),
            30,
        )
    }

    #[test]
    fn a_key_verifies_for_its_agents_only_and_is_stored_as_a_digest() {
        let k = issued(&["a1"]);
        assert!(!k.record.secret_digest.contains(&k.api_key[31..]));
        let now = Timestamp::from_millis(2_000);
        let caller = verify(&k.record, &k.api_key, "a1", now).expect("valid");
        assert_eq!(caller.tenant.as_str(), "t1");
        assert_eq!(
            verify(&k.record, &k.api_key, "a2", now),
            Err(Denied::AgentNotCovered)
        );
        assert_eq!(
            verify(&k.record, &k.api_key, "../a1", now),
            Err(Denied::AgentNotCovered)
        );
        let star = issued(&["*"]);
        assert!(verify(&star.record, &star.api_key, "anyone", now).is_ok());
    }

    #[test]
    fn wrong_expired_revoked_and_malformed_keys_are_refused() {
        let k = issued(&["a1"]);
        let now = Timestamp::from_millis(2_000);
        let mut wrong = k.api_key.clone();
        wrong.pop();
        wrong.push('x');
        assert_eq!(
            verify(&k.record, &wrong, "a1", now),
            Err(Denied::WrongSecret)
        );
        let later = Timestamp::from_millis(1_000 + 31 * 86_400_000);
        assert_eq!(
            verify(&k.record, &k.api_key, "a1", later),
            Err(Denied::Expired)
        );
        let mut revoked = k.record.clone();
        revoked.revoked_at = Some(now);
        assert_eq!(
            verify(&revoked, &k.api_key, "a1", now),
            Err(Denied::Revoked)
        );
        for bad in ["", "oik_", "Bearer x", "oik_short_x", &k.api_key[..40]] {
            assert_eq!(
                verify(&k.record, bad, "a1", now),
                Err(Denied::Malformed),
                "{bad}"
            );
        }
    }
}
