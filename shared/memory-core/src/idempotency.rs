//! Idempotency keys for writes (docs/guarantees.md "Idempotent writes"), with the semantics of
//! Powertools for AWS Lambda's idempotency utility and the OpenWOP client's `Idempotency-Key`: the
//! first request with a key records an in-progress marker, the write itself records the result in
//! the same all-or-nothing store write, a repeat with the same payload gets the recorded result, a
//! repeat with another payload is refused (`idempotency_key_mismatch`), a repeat while the first is
//! in flight is refused (`idempotency_in_flight`), and a marker whose holder died expires after its
//! lease so the retry can proceed.
//!
//! Why the result rides in the entries' transaction: a marker completed *after* the write could be
//! lost with the process between the two, and the retry would write again. Because the record
//! carries the attempt that holds it, and the completing write is conditional on that attempt, an
//! attempt whose lease ran out (it was slow, not dead) can no longer commit once another attempt
//! took the key over: of two attempts, at most one writes. Entry ids of a keyed put are derived
//! from the key and the record's first attempt, so every attempt builds byte-identical entries
//! and a retry of the very same transaction is recognised as already applied.
//!
//! The same record doubles as a "do once" latch for background announcements (a duplicate dream
//! must not publish `memory.compacted` twice): see `dream.rs`.

use sha2::{Digest, Sha256};

use crate::model::hex;
use crate::time::Timestamp;
use memory_guard::TenantId;

/// How long a completed key answers with its recorded result (docs/guarantees.md "Idempotent
/// writes" states it).
pub const DEFAULT_KEY_TTL_SECONDS: i64 = 24 * 60 * 60;
/// The longest an attempt holds a key: a claim's lease is the invocation's deadline, never more
/// than this (docs/guarantees.md "Idempotent writes" states the bound). An attempt that fails
/// gives its key back at once; one that cannot (the release is lost too) or that died holds it
/// until this bound at most, after which a retry takes it over. A live attempt overtaken after
/// its lease cannot commit (the completing write is conditional on its attempt), so the bound
/// costs nothing in safety: of two attempts at most one writes.
pub const MAX_LEASE_MILLIS: i64 = 30_000;

/// Until when an attempt starting at `now` holds its key: the invocation's deadline
/// (`deadline_ms`, epoch milliseconds, when known and still ahead), capped at
/// [`MAX_LEASE_MILLIS`] from `now`.
pub fn lease_until(now: Timestamp, deadline_ms: Option<i64>) -> Timestamp {
    let cap = now.plus_millis(MAX_LEASE_MILLIS);
    deadline_ms
        .map(Timestamp::from_millis)
        .filter(|d| *d > now)
        .map_or(cap, |d| d.min(cap))
}
/// Longest key accepted (Stripe's and the client's conventional bound).
pub const MAX_KEY_BYTES: usize = 255;

/// A client's idempotency key, scoped to its tenant and kept only as a digest: the raw key may
/// be a user-chosen string, so it is neither stored nor logged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey {
    tenant: TenantId,
    digest: String,
}

impl IdempotencyKey {
    /// `None` unless `raw` is 1-255 printable ASCII characters.
    pub fn parse(tenant: &TenantId, raw: &str) -> Option<Self> {
        let ok = (1..=MAX_KEY_BYTES).contains(&raw.len())
            && raw.bytes().all(|b| (0x21..=0x7e).contains(&b));
        ok.then(|| Self::derive(tenant, "client", raw))
    }

    /// A host-internal key (`namespace` keeps it apart from every client key).
    pub fn internal(tenant: &TenantId, namespace: &str, name: &str) -> Self {
        Self::derive(tenant, namespace, name)
    }

    fn derive(tenant: &TenantId, namespace: &str, raw: &str) -> Self {
        let mut h = Sha256::new();
        for part in ["wop-memory/idempotency/v1", tenant.as_str(), namespace, raw] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        IdempotencyKey {
            tenant: tenant.clone(),
            digest: hex(&h.finalize()),
        }
    }

    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// 64 hex characters; safe in keys and log lines.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The id of the `index`-th entry of a keyed put whose first attempt began at `first_at`: a
    /// ULID (so ids still sort by time) whose random part comes from the key.
    pub fn entry_id(&self, first_at: Timestamp, index: usize) -> String {
        let mut h = Sha256::new();
        h.update(b"wop-memory/keyed-entry/v1\0");
        h.update(self.digest.as_bytes());
        h.update((index as u64).to_be_bytes());
        let d = h.finalize();
        let mut random = [0u8; 16];
        random[6..].copy_from_slice(&d[..10]);
        let ms = u64::try_from(first_at.as_millis()).unwrap_or(0);
        ulid::Ulid::from_parts(ms, u128::from_be_bytes(random)).to_string()
    }
}

/// A digest of a request's meaning, to tell a retry from a different request under the same key.
#[derive(Default)]
pub struct PayloadDigest(Sha256);

impl PayloadDigest {
    pub fn new(op: &str) -> Self {
        let mut d = PayloadDigest(Sha256::new());
        d.field(op);
        d
    }

    /// Adds one length-prefixed field, so field boundaries cannot shift.
    pub fn field(&mut self, value: &str) -> &mut Self {
        self.0.update((value.len() as u64).to_be_bytes());
        self.0.update(value.as_bytes());
        self
    }

    pub fn opt(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(v) => self.field("1").field(v),
            None => self.field("0"),
        }
    }

    pub fn finish(self) -> String {
        hex(&self.0.finalize()[..16])
    }
}

/// One attempt's bid for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyClaim {
    pub key: IdempotencyKey,
    pub payload: String,
    /// Unique per attempt; the completing write is conditional on it.
    pub attempt: String,
    pub now: Timestamp,
    /// Until then the holder is presumed alive; after it, another attempt may take over.
    pub lease_until: Timestamp,
    /// When the record stops answering (the key's window).
    pub expires_at: Timestamp,
}

/// A key's record as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    pub payload: String,
    pub attempt: String,
    pub first_attempt_at: Timestamp,
    pub lease_until: Timestamp,
    /// The recorded answer, once the holder finished.
    pub result: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This attempt holds the key: new, or taken over from a holder whose lease ran out.
    Acquired { first_attempt_at: Timestamp },
    /// Another attempt holds the key or has finished with it.
    Held(KeyRecord),
}

/// What a write records about its key when it commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub key: IdempotencyKey,
    pub attempt: String,
    pub result: String,
}

/// How a claim that was not acquired is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Same payload, finished: answer with the recorded result.
    Replay(String),
    /// Same payload, still held by a live attempt.
    InFlight,
    /// Another payload under the same key.
    Mismatch,
}

impl KeyRecord {
    pub fn verdict(&self, payload: &str) -> Verdict {
        if self.payload != payload {
            return Verdict::Mismatch;
        }
        match &self.result {
            Some(r) => Verdict::Replay(r.clone()),
            None => Verdict::InFlight,
        }
    }
}

/// A fresh attempt token: unique across processes (ULID from the wall clock and randomness).
pub fn new_attempt() -> String {
    ulid::Ulid::new().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(s: &str) -> TenantId {
        TenantId::parse(s).unwrap()
    }

    #[test]
    fn keys_are_tenant_scoped_and_validated() {
        let a = IdempotencyKey::parse(&tenant("a"), "k-1").unwrap();
        let b = IdempotencyKey::parse(&tenant("b"), "k-1").unwrap();
        assert_ne!(a.digest(), b.digest());
        assert!(!a.digest().contains("k-1"));
        assert_ne!(
            a,
            IdempotencyKey::internal(&tenant("a"), "event", "k-1"),
            "client and host keys never meet"
        );
        for bad in ["", "has space", "tab\t", "é", &"x".repeat(256)] {
            assert!(
                IdempotencyKey::parse(&tenant("a"), bad).is_none(),
                "{bad:?}"
            );
        }
        assert!(IdempotencyKey::parse(&tenant("a"), &"x".repeat(255)).is_some());
    }

    #[test]
    fn keyed_ids_are_stable_time_ordered_ulids() {
        let k = IdempotencyKey::parse(&tenant("a"), "key").unwrap();
        let at = Timestamp::from_millis(1_700_000_000_000);
        let id0 = k.entry_id(at, 0);
        assert_eq!(id0, k.entry_id(at, 0));
        assert_ne!(id0, k.entry_id(at, 1));
        let parsed = ulid::Ulid::from_string(&id0).unwrap();
        assert_eq!(parsed.timestamp_ms(), 1_700_000_000_000);
        assert!(k.entry_id(at.plus_millis(1), 0) > id0);
        let other = IdempotencyKey::parse(&tenant("a"), "key2").unwrap();
        assert_ne!(other.entry_id(at, 0), id0);
    }

    #[test]
    fn a_lease_is_the_deadline_capped_at_the_bound() {
        let now = Timestamp::from_millis(1_000_000);
        let cap = now.plus_millis(MAX_LEASE_MILLIS);
        assert_eq!(lease_until(now, None), cap, "unknown deadline: the bound");
        assert_eq!(lease_until(now, Some(1_005_000)), now.plus_millis(5_000));
        assert_eq!(
            lease_until(now, Some(1_000_000 + 900_000)),
            cap,
            "15 min timeout"
        );
        assert_eq!(
            lease_until(now, Some(999_000)),
            cap,
            "a past deadline is ignored"
        );
    }

    #[test]
    fn verdicts() {
        let rec = KeyRecord {
            payload: "p".into(),
            attempt: "a".into(),
            first_attempt_at: Timestamp::from_millis(0),
            lease_until: Timestamp::from_millis(0),
            result: None,
        };
        assert_eq!(rec.verdict("p"), Verdict::InFlight);
        assert_eq!(rec.verdict("q"), Verdict::Mismatch);
        let done = KeyRecord {
            result: Some("r".into()),
            ..rec
        };
        assert_eq!(done.verdict("p"), Verdict::Replay("r".into()));
        assert_eq!(done.verdict("q"), Verdict::Mismatch);
    }

    #[test]
    fn digests_separate_fields() {
        let mut a = PayloadDigest::new("put");
        a.field("ab").field("c");
        let mut b = PayloadDigest::new("put");
        b.field("a").field("bc");
        assert_ne!(a.finish(), b.finish());
    }
}
