//! The SR-1 write chokepoint (`writeAgentMemoryRedacted` of the spec's reference pattern): every
//! string that will be persisted passes through the run's redactor before it reaches a port,
//! and the run's secrets live only in this call's memory. Also the host-internal delete.
//!
//! A request is validated whole before anything is written, and the write itself is one
//! all-or-nothing store call, so a rejected or failed request leaves nothing behind.
//!
//! With an `idempotencyKey` (docs/guarantees.md "Idempotent writes", `idempotency.rs`) a put or
//! delete is done at most once per key within the key's window: the entries' ids come from the key,
//! the result is recorded in the same store write, and a repeat gets the recorded answer. Without
//! one, a client that retries after a timeout whose write did land stores the entries again.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::error::{CoreError, StoreError};
use crate::events::DomainEvent;
use crate::idempotency::{
    lease_until, new_attempt, Claim, Completion, IdempotencyKey, KeyClaim, PayloadDigest, Verdict,
    DEFAULT_KEY_TTL_SECONDS,
};
use crate::model::{
    is_valid_entry_id, Attribution, EntryKey, MemoryEntry, NewEntry, StoredEntry, SubjectKey, Tier,
};
use crate::ports::{CorePorts, Embedder, IdSource, PassKind, PassQueue, QueuedPass, QuotaStore};
use crate::quota::{Pressure, QuotaCheck, Refusal};
use crate::time::Timestamp;
use memory_guard::{MemoryRef, Redactor, SecretRegistry, TenantId, TenantScope};

/// Bounds of one write request (docs/api.md "Limits of a write (whole request rejected, nothing
/// stored)"). Content is bounded after redaction too, since a marker can be longer than the secret
/// it replaces; 64 KiB keeps an item far below DynamoDB's 400 KB with tags and attributes included.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
pub const MAX_TAGS: usize = 32;
pub use crate::model::MAX_TAG_BYTES;
pub const MAX_ENTRIES_PER_REQUEST: usize = 25;
pub const MAX_SUBJECT_BYTES: usize = 256;
pub const MAX_SECRETS_PER_REQUEST: usize = 10_000;

/// A resolved secret as the request carries it; the value is a `secrecy` string, so `{:?}`
/// prints a placeholder and the bytes are wiped when the request is dropped.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretInput {
    pub secret_id: String,
    pub value: SecretString,
}

#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EntryInput {
    pub content: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub subject: Option<String>,
    /// `"transactional"` (default) or `"long-term"`.
    #[serde(default)]
    pub tier: Option<String>,
}

/// Counts only; content and subject never reach a formatter.
impl fmt::Debug for EntryInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryInput")
            .field("content_bytes", &self.content.len())
            .field("tags", &self.tags.len())
            .field("has_subject", &self.subject.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PutRequest {
    pub tenant_id: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub memory_ref: String,
    pub entries: Vec<EntryInput>,
    #[serde(default)]
    pub secrets: Vec<SecretInput>,
    #[serde(default)]
    pub attribution: AttributionInput,
    /// Makes the put happen at most once per key (docs/guarantees.md "Idempotent writes").
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttributionInput {
    #[serde(default)]
    pub node_id: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub id: String,
    pub created_at: Timestamp,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutOutput {
    pub written: Vec<Written>,
    /// Not on the wire: for metrics.
    #[serde(skip)]
    pub redactions: usize,
    /// Not on the wire: the answer was the recorded result of an earlier request with the
    /// same idempotency key, and nothing was written.
    #[serde(skip)]
    pub replayed: bool,
    /// Not on the wire: quotas this put left at or above their warning share
    /// (docs/quotas.md "Metrics"), for the `QuotaNearLimit` metric.
    #[serde(skip)]
    pub pressure: Vec<Pressure>,
    /// Not on the wire: the tenant's Bedrock token quota refused embedding some of these
    /// entries; they are stored without a vector and left to the embed pass
    /// (docs/quotas.md "Bedrock tokens"), for the `QuotaRefused` metric.
    #[serde(skip)]
    pub embedding_refused: Option<Refusal>,
}

#[derive(Clone)]
pub struct MemoryWriter {
    ports: CorePorts,
    ids: Arc<dyn IdSource>,
    key_ttl_seconds: i64,
    embedder: Option<Arc<dyn Embedder>>,
    /// Where the embed pass of a ref this writer left entries without a vector is queued.
    embed_queue: Option<Arc<dyn PassQueue>>,
    /// SR-1 secrets of the deployment (a door's configuration), redacted from every put beside
    /// the request's own and not counted against the request's maximum.
    configured: Arc<[SecretInput]>,
    /// Whether an entry may have empty content (files of the Claude memory tool may be empty,
    /// as on a filesystem); other doors keep refusing empty entries.
    empty_content: bool,
    /// Where the tenant's quota limits are read; without it puts are not refused by a quota
    /// (the store still keeps the stored counters).
    quotas: Option<Arc<dyn QuotaStore>>,
}

/// Embedding calls one write makes at a time (a put holds up to 25 entries; Bedrock throttles
/// bursts per account).
pub const EMBED_CONCURRENCY: usize = 8;

/// The most time a write spends embedding, all calls together: what is not embedded by then is
/// stored without a vector, so a slow or throttling model never takes the time the store write
/// needs (memory-write has 15 s in all); the embed pass (`embed_pass`) fills it in afterwards.
pub const EMBED_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

/// A claimed key: what the completing write must carry.
struct Held {
    key: IdempotencyKey,
    attempt: String,
    first_attempt_at: Timestamp,
}

/// The outcome of claiming a key: proceed (holding it) or answer from the record.
enum Begun {
    Proceed(Option<Held>),
    Replay(String),
}

/// A put request admitted, validated and redacted: what may be stored.
struct Prepared {
    memory_ref: memory_guard::MemoryRef,
    now: Timestamp,
    validated: Vec<NewEntry>,
    redactions: usize,
    attribution: Attribution,
}

/// The request's entries as stored. A write and a rewrite differ only in how an entry's id is
/// chosen, when it counts as created and which subject an entry that names none keeps, so those
/// are theirs to say and all else is said once.
fn stored_entries(
    memory_ref: &MemoryRef,
    attribution: &Attribution,
    validated: Vec<NewEntry>,
    created_at: Timestamp,
    mut id_of: impl FnMut(usize) -> String,
    kept_subject: impl Fn(usize) -> Option<SubjectKey>,
) -> Vec<StoredEntry> {
    validated
        .into_iter()
        .enumerate()
        .map(|(index, e)| StoredEntry {
            memory_ref: memory_ref.clone(),
            entry: MemoryEntry {
                id: id_of(index),
                content: e.content,
                tags: e.tags,
                created_at,
                expires_at: e.expires_at,
            },
            tier: e.tier,
            subject: match e.subject.as_deref() {
                Some(s) => Some(SubjectKey::derive(memory_ref.tenant(), s)),
                None => kept_subject(index),
            },
            attribution: attribution.clone(),
            provenance: Vec::new(),
            embedding: None,
        })
        .collect()
}

fn check_opt_id(field: &'static str, v: &Option<String>) -> Result<(), CoreError> {
    match v {
        Some(s) if !is_valid_entry_id(s) => Err(CoreError::invalid(
            field,
            "must be 1-128 characters of [A-Za-z0-9._-]",
        )),
        _ => Ok(()),
    }
}

/// The registry of one run's BYOK-resolved secrets; rejected ids fail the whole request.
pub fn registry_from(secrets: &[SecretInput]) -> Result<SecretRegistry, CoreError> {
    registry_with(secrets, &[])
}

/// [`registry_from`] of the request's secrets, plus the deployment's `configured` ones (checked
/// when the function started), which do not count against the request's maximum.
pub fn registry_with(
    secrets: &[SecretInput],
    configured: &[SecretInput],
) -> Result<SecretRegistry, CoreError> {
    if secrets.len() > MAX_SECRETS_PER_REQUEST {
        return Err(CoreError::invalid(
            "secrets",
            format!("at most {MAX_SECRETS_PER_REQUEST} per request"),
        ));
    }
    let mut registry = SecretRegistry::new();
    for (i, s) in secrets.iter().enumerate() {
        registry
            .register(s.secret_id.clone(), s.value.expose_secret())
            .map_err(|e| match e {
                memory_guard::GuardError::SecretTooLong => CoreError::invalid(
                    format!("secrets[{i}].value"),
                    format!("at most {} bytes", memory_guard::MAX_SECRET_BYTES),
                ),
                _ => CoreError::invalid(
                    format!("secrets[{i}].secretId"),
                    "must be 1-128 of [A-Za-z0-9._:/@-]",
                ),
            })?;
    }
    for s in configured {
        registry
            .register(s.secret_id.clone(), s.value.expose_secret())
            .map_err(|_| CoreError::invalid("configured secrets", "refused by SR-1"))?;
    }
    Ok(registry)
}

/// The schema path of one entry's field, as error messages name it.
fn entry_field(index: usize, name: &str) -> String {
    format!("entries[{index}].{name}")
}

/// Validates one entry against the documented bounds, with nothing of its text in the error.
fn validate_entry(
    index: usize,
    input: &EntryInput,
    now: Timestamp,
    empty_content: bool,
) -> Result<NewEntry, CoreError> {
    let field = |name: &str| entry_field(index, name);
    if input.content.is_empty() && !empty_content {
        return Err(CoreError::invalid(field("content"), "must not be empty"));
    }
    if input.content.len() > MAX_CONTENT_BYTES {
        return Err(CoreError::invalid(
            field("content"),
            format!("at most {MAX_CONTENT_BYTES} bytes"),
        ));
    }
    if input.tags.len() > MAX_TAGS {
        return Err(CoreError::invalid(
            field("tags"),
            format!("at most {MAX_TAGS} tags"),
        ));
    }
    for tag in &input.tags {
        if !crate::model::is_valid_tag(tag) {
            return Err(CoreError::invalid(
                field("tags"),
                format!("each tag 1-{MAX_TAG_BYTES} bytes without control characters"),
            ));
        }
    }
    let expires_at = match &input.expires_at {
        None => None,
        Some(raw) => {
            let at = Timestamp::parse_rfc3339(raw)
                .map_err(|_| CoreError::invalid(field("expiresAt"), "must be RFC 3339"))?;
            if at <= now {
                return Err(CoreError::invalid(
                    field("expiresAt"),
                    "must be in the future",
                ));
            }
            Some(at)
        }
    };
    if let Some(subject) = &input.subject {
        if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES {
            return Err(CoreError::invalid(
                field("subject"),
                format!("1-{MAX_SUBJECT_BYTES} bytes"),
            ));
        }
    }
    let tier = match &input.tier {
        None => Tier::Transactional,
        Some(t) => Tier::parse(t).ok_or_else(|| {
            CoreError::invalid(field("tier"), "\"transactional\" or \"long-term\"")
        })?,
    };
    Ok(NewEntry {
        content: input.content.clone(),
        tags: input.tags.clone(),
        expires_at,
        subject: input.subject.clone(),
        tier,
    })
}

/// Applies the redactor to content and tags, re-checking bounds on what will be stored.
fn redact_entry(
    index: usize,
    entry: &mut NewEntry,
    redactor: &Redactor,
) -> Result<usize, CoreError> {
    let field = |name: &str| entry_field(index, name);
    let (content, mut count) = redactor.redact_counting(&entry.content);
    if let std::borrow::Cow::Owned(c) = content {
        entry.content = c;
    }
    for tag in &mut entry.tags {
        let (t, n) = redactor.redact_counting(tag);
        count += n;
        if let std::borrow::Cow::Owned(t) = t {
            *tag = t;
        }
    }
    if entry.content.len() > MAX_CONTENT_BYTES {
        return Err(CoreError::invalid(
            field("content"),
            format!("at most {MAX_CONTENT_BYTES} bytes after redaction"),
        ));
    }
    if entry.tags.iter().any(|t| t.len() > MAX_TAG_BYTES) {
        return Err(CoreError::invalid(
            field("tags"),
            format!("each tag at most {MAX_TAG_BYTES} bytes after redaction"),
        ));
    }
    Ok(count)
}

impl MemoryWriter {
    pub fn new(ports: CorePorts, ids: Arc<dyn IdSource>) -> Self {
        MemoryWriter {
            ports,
            ids,
            key_ttl_seconds: DEFAULT_KEY_TTL_SECONDS,
            embedder: None,
            embed_queue: None,
            configured: Arc::from(Vec::new()),
            empty_content: false,
            quotas: None,
        }
    }

    /// Enforces the tenant's quotas on every put (docs/quotas.md "Quotas").
    pub fn with_quotas(mut self, quotas: Option<Arc<dyn QuotaStore>>) -> Self {
        self.quotas = quotas;
        self
    }

    /// The quota check of a put of `stored` at `now`: empty without quotas.
    async fn quota_check(
        &self,
        stored: &[StoredEntry],
        now: Timestamp,
    ) -> Result<QuotaCheck, CoreError> {
        let (Some(quotas), Some(first)) = (&self.quotas, stored.first()) else {
            return Ok(QuotaCheck::default());
        };
        let limits = quotas.limits(first.memory_ref.tenant()).await?;
        Ok(QuotaCheck::for_put(&limits, stored, now))
    }

    /// The quotas an accepted put left near their limits: its limited counters read back (a
    /// `GetItem` each, at most four). A failed read loses only the warning.
    async fn pressure_after(&self, check: &QuotaCheck) -> Vec<Pressure> {
        let Some(quotas) = &self.quotas else {
            return Vec::new();
        };
        let counters: Vec<_> = check.limited().map(|(c, _, _)| c.clone()).collect();
        if counters.is_empty() {
            return Vec::new();
        }
        match quotas.counters_consistent(&counters).await {
            Ok(values) => crate::quota::pressure(check, &values),
            Err(e) => {
                tracing::warn!(error = %e, "quota counters not read back");
                Vec::new()
            }
        }
    }

    /// A writer that stores entries with empty content too (the memory tool's empty files).
    pub fn allowing_empty_content(mut self) -> Self {
        self.empty_content = true;
        self
    }

    /// Redacts `secrets` (the door's configured ones) from every put too, whatever the request
    /// brings: a caller may still send its documented maximum of its own.
    pub fn with_configured_secrets(mut self, secrets: Vec<SecretInput>) -> Self {
        self.configured = Arc::from(secrets);
        self
    }

    /// Queues the embed pass of a ref a write left entries without a vector in, so the vectors
    /// land within seconds; without a queue the scheduled sweep finds the marked ref.
    pub fn with_embed_queue(mut self, queue: Option<Arc<dyn PassQueue>>) -> Self {
        self.embed_queue = queue;
        self
    }

    /// After a write stored `missing` entries of `memory_ref` without a vector: marks the ref
    /// pending for an embed pass, then queues one. The entries are durable by now, so neither
    /// step fails the write: a lost mark is the same window the other passes' marks have (a
    /// replay marks again), a lost enqueue is what the sweep is for.
    async fn embed_later(&self, memory_ref: &MemoryRef, missing: usize, since: Timestamp) {
        if missing == 0 {
            return;
        }
        self.ports
            .store
            .mark_pending(memory_ref, PassKind::Embed, since)
            .await;
        let Some(queue) = &self.embed_queue else {
            return;
        };
        let pass = QueuedPass {
            kind: PassKind::Embed,
            tenant_id: memory_ref.tenant().to_string(),
            memory_ref: memory_ref.to_string(),
        };
        if let Err(e) = queue.enqueue(&[pass]).await {
            tracing::warn!(error = %e, missing, "embed pass not queued; the sweep will find the ref");
        }
    }

    /// Stores each new entry's embedding beside it (docs/search.md "Semantic search").
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    /// Embeds each entry's content (already SR-1-redacted), [`EMBED_CONCURRENCY`] calls at a
    /// time, within [`EMBED_BUDGET`]. An entry whose embedding fails or runs out of time is
    /// stored without a vector: the write is not lost to an outage of the model, text search
    /// still finds the entry, the log says how many (ids and counts only), and the embed pass
    /// gives it one later (`embed_later`). Returns how many are missing.
    ///
    /// The calls run as the request's tenant ([`crate::acting_tenant::carried`]), so their
    /// tokens are metered and charged to its token quota; once that quota refuses, no further
    /// call is made and the refusal is answered beside the count.
    async fn embed(&self, entries: &mut [StoredEntry]) -> (usize, Option<Refusal>) {
        let Some(embedder) = &self.embedder else {
            return (0, None);
        };
        let deadline = tokio::time::Instant::now() + EMBED_BUDGET;
        let mut failed = 0usize;
        let mut refused: Option<Refusal> = None;
        for chunk in entries.chunks_mut(EMBED_CONCURRENCY) {
            if refused.is_some() {
                break;
            }
            let mut calls = tokio::task::JoinSet::new();
            for (index, e) in chunk.iter().enumerate() {
                let (embedder, text) = (embedder.clone(), e.entry.content.clone());
                calls.spawn(crate::acting_tenant::carried(async move {
                    (index, embedder.embed(&text).await)
                }));
            }
            // Past the deadline the calls still running are dropped (the set aborts them).
            while let Ok(Some(done)) = tokio::time::timeout_at(deadline, calls.join_next()).await {
                match done {
                    Ok((index, Ok(embedding))) => chunk[index].embedding = Some(embedding),
                    Ok((_, Err(StoreError::QuotaExceeded(r)))) => {
                        failed += 1;
                        refused.get_or_insert(r);
                    }
                    Ok((index, Err(e))) => {
                        failed += 1;
                        tracing::warn!(entry = %chunk[index].entry.id, error = %e, "stored without an embedding");
                    }
                    Err(_) => failed += 1,
                }
            }
        }
        let missing = entries.iter().filter(|e| e.embedding.is_none()).count();
        if missing > 0 {
            tracing::warn!(
                failed,
                missing,
                entries = entries.len(),
                token_quota_refused = refused.is_some(),
                "embeddings missing, left to the embed pass"
            );
        }
        (missing, refused)
    }

    /// How long a key answers with its recorded result (default 24 h).
    pub fn with_key_ttl_seconds(mut self, seconds: i64) -> Self {
        self.key_ttl_seconds = seconds.max(1);
        self
    }

    fn parse_key(
        tenant: &TenantId,
        raw: Option<&str>,
    ) -> Result<Option<IdempotencyKey>, CoreError> {
        raw.map(|raw| {
            IdempotencyKey::parse(tenant, raw).ok_or_else(|| {
                CoreError::invalid("idempotencyKey", "1-255 printable ASCII characters")
            })
        })
        .transpose()
    }

    /// Claims `key` for this attempt, or answers from its record.
    async fn begin(
        &self,
        key: Option<IdempotencyKey>,
        payload: &str,
        now: Timestamp,
    ) -> Result<Begun, CoreError> {
        let Some(key) = key else {
            return Ok(Begun::Proceed(None));
        };
        let claim = KeyClaim {
            key: key.clone(),
            payload: payload.to_owned(),
            attempt: new_attempt(),
            now,
            lease_until: lease_until(now, crate::deadline::invocation_deadline_ms()),
            expires_at: now.plus_millis(self.key_ttl_seconds.saturating_mul(1000)),
        };
        let claimed = match self.ports.store.claim_key(&claim).await {
            Ok(claimed) => claimed,
            Err(e) => {
                // The claim may have landed with its answer lost: give it back (conditional
                // on this attempt and no result, so it can only ever remove this claim), or
                // the key stays locked until the lease for an attempt that is already over.
                self.release(&Held {
                    key,
                    attempt: claim.attempt,
                    first_attempt_at: now,
                })
                .await;
                return Err(e.into());
            }
        };
        match claimed {
            Claim::Acquired { first_attempt_at } => Ok(Begun::Proceed(Some(Held {
                key,
                attempt: claim.attempt,
                first_attempt_at,
            }))),
            Claim::Held(record) => match record.verdict(payload) {
                Verdict::Replay(result) => Ok(Begun::Replay(result)),
                Verdict::InFlight => Err(CoreError::IdempotencyInFlight),
                Verdict::Mismatch => Err(CoreError::IdempotencyKeyMismatch),
            },
        }
    }

    /// Gives the key back after a failure that wrote nothing, so the caller's retry proceeds
    /// at once. A write whose answer was lost may still have applied: then the record holds
    /// the result and stays (the release is conditional on no result).
    async fn release(&self, held: &Held) {
        if let Err(e) = self.ports.store.release_key(&held.key, &held.attempt).await {
            tracing::warn!(error = %e, "idempotency key kept until its lease");
        }
    }

    /// After this attempt lost its key to another attempt (its lease ran out while it was
    /// slow): answer as a repeat would be answered.
    async fn after_takeover(
        &self,
        held: &Held,
        payload: &str,
        now: Timestamp,
    ) -> Result<String, CoreError> {
        match self.begin(Some(held.key.clone()), payload, now).await? {
            Begun::Replay(result) => Ok(result),
            // Acquired again: the other attempt died too. Nothing of this attempt was written
            // (its write was conditional on holding the key); the caller's retry proceeds.
            Begun::Proceed(_) => Err(CoreError::IdempotencyInFlight),
        }
    }

    /// Admits the ref, then validates and SR-1-redacts every entry: the one preparation both
    /// kinds of put share, so nothing reaches a port unredacted whichever is called.
    fn prepare(&self, request: &PutRequest) -> Result<Prepared, CoreError> {
        let memory_ref = crate::model::admitted_ref(&request.tenant_id, &request.memory_ref)?;
        check_opt_id("runId", &request.run_id)?;
        check_opt_id("attribution.nodeId", &request.attribution.node_id)?;
        check_opt_id("attribution.agentId", &request.attribution.agent_id)?;
        if request.entries.is_empty() || request.entries.len() > MAX_ENTRIES_PER_REQUEST {
            return Err(CoreError::invalid(
                "entries",
                format!("1-{MAX_ENTRIES_PER_REQUEST} entries per request"),
            ));
        }
        let now = self.ports.clock.now();
        let redactor = registry_with(&request.secrets, &self.configured)?.redactor();
        // Attribution ids are stored and published as they are (`memory.written` carries them),
        // so an id holding a registered secret is refused rather than stored or redacted into a
        // marker that no longer fits the id grammar.
        for (field, id) in [
            ("runId", &request.run_id),
            ("attribution.nodeId", &request.attribution.node_id),
            ("attribution.agentId", &request.attribution.agent_id),
        ] {
            if id
                .as_deref()
                .is_some_and(|id| redactor.redact_counting(id).1 > 0)
            {
                return Err(CoreError::invalid(
                    field,
                    "holds a registered secret value; ids are stored and published as they are",
                ));
            }
        }
        let mut redactions = 0;
        let mut validated = Vec::with_capacity(request.entries.len());
        for (index, input) in request.entries.iter().enumerate() {
            let mut entry = validate_entry(index, input, now, self.empty_content)?;
            redactions += redact_entry(index, &mut entry, &redactor)?;
            validated.push(entry);
        }
        let attribution = Attribution {
            run_id: request.run_id.clone(),
            node_id: request.attribution.node_id.clone(),
            agent_id: request.attribution.agent_id.clone(),
        };
        Ok(Prepared {
            memory_ref,
            now,
            validated,
            redactions,
            attribution,
        })
    }

    /// Validates, redacts, stores all entries in one all-or-nothing write, then announces each
    /// with a content-free `memory.written`.
    pub async fn put(&self, request: &PutRequest) -> Result<PutOutput, CoreError> {
        let Prepared {
            memory_ref,
            now,
            validated,
            redactions,
            attribution,
        } = self.prepare(request)?;
        let tenant = memory_ref.tenant().clone();
        let key = Self::parse_key(&tenant, request.idempotency_key.as_deref())?;
        // The request's meaning as it will be stored (after SR-1, so no secret value is hashed
        // into the record): a retry has the same digest, a different request another.
        let payload = {
            let mut d = PayloadDigest::new("put");
            d.field(&memory_ref.to_string())
                .opt(attribution.run_id.as_deref())
                .opt(attribution.node_id.as_deref())
                .opt(attribution.agent_id.as_deref());
            for e in &validated {
                d.field(&e.content).field(&e.tags.len().to_string());
                for t in &e.tags {
                    d.field(t);
                }
                d.opt(e.expires_at.map(|t| t.as_millis().to_string()).as_deref())
                    .opt(
                        e.subject
                            .as_deref()
                            .map(|s| SubjectKey::derive(&tenant, s))
                            .as_ref()
                            .map(SubjectKey::as_str),
                    )
                    .field(e.tier.as_str());
            }
            d.finish()
        };
        let held = match self.begin(key, &payload, now).await? {
            Begun::Proceed(held) => held,
            Begun::Replay(result) => {
                let out = Self::replay(&result)?;
                // The attempt that stored these entries may have lost every answer (or died)
                // between its transaction and its work marker; the replay marks the ref so the
                // entries are not left out of the background passes until its next write.
                if let Some(since) = out.written.iter().map(|w| w.created_at).min() {
                    self.mark_tiers_pending(&memory_ref, validated.iter().map(|e| e.tier), since)
                        .await;
                    // Whether that attempt's vectors all landed is not recorded: the embed pass
                    // finds out (and finds nothing to do when they did).
                    if self.embedder.is_some() {
                        self.ports
                            .store
                            .mark_pending(&memory_ref, PassKind::Embed, since)
                            .await;
                    }
                }
                return Ok(out);
            }
        };
        let created_at = held.as_ref().map_or(now, |h| h.first_attempt_at);
        let mut stored = stored_entries(
            &memory_ref,
            &attribution,
            validated,
            created_at,
            |index| match &held {
                Some(h) => h.key.entry_id(h.first_attempt_at, index),
                None => self.ids.next_id(now),
            },
            |_| None,
        );
        let check = match self.quota_check(&stored, now).await {
            Ok(check) => check,
            Err(e) => {
                if let Some(h) = &held {
                    self.release(h).await;
                }
                return Err(e);
            }
        };
        let (missing, embedding_refused) = self.embed(&mut stored).await;
        let mut output = PutOutput {
            written: written_of(&stored),
            redactions,
            replayed: false,
            pressure: Vec::new(),
            embedding_refused,
        };
        let completion = match &held {
            Some(h) => Some(Completion {
                key: h.key.clone(),
                attempt: h.attempt.clone(),
                result: serde_json::to_string(&output).map_err(|_| {
                    CoreError::Store(StoreError::Corrupt {
                        key: "put result".into(),
                    })
                })?,
            }),
            None => None,
        };
        match (
            self.ports
                .store
                .put_entries_checked(&stored, completion.as_ref(), &check)
                .await,
            &held,
        ) {
            (Ok(()), _) => {}
            (Err(StoreError::Conflict { .. }), Some(h)) => {
                return Self::replay(&self.after_takeover(h, &payload, now).await?);
            }
            (Err(e), held) => {
                if let Some(h) = held {
                    self.release(h).await;
                }
                return Err(e.into());
            }
        }

        output.pressure = self.pressure_after(&check).await;
        self.embed_later(&memory_ref, missing, created_at).await;
        self.announce_written(&memory_ref, &stored).await;
        tracing::info!(
            tenant = %tenant,
            entries = stored.len(),
            redactions,
            "entries written"
        );
        Ok(output)
    }

    /// Announces stored entries (`memory.written`). The entries are durable at this point;
    /// failing the call now would invite a retry that writes them twice. Publishing already
    /// retried inside the adapter, so report and go on.
    async fn announce_written(&self, memory_ref: &MemoryRef, stored: &[StoredEntry]) {
        let events: Vec<DomainEvent> = stored
            .iter()
            .map(|s| {
                DomainEvent::memory_written(
                    memory_ref,
                    &s.entry.id,
                    s.entry.created_at,
                    s.tier,
                    &s.entry.tags,
                    &s.attribution,
                )
            })
            .collect();
        if let Err(e) = self.ports.publisher.publish(&events).await {
            tracing::error!(error = %e, events = events.len(), "memory.written not published");
        }
    }

    /// Marks the pass of each tier written as pending since `since`.
    async fn mark_tiers_pending(
        &self,
        memory_ref: &MemoryRef,
        tiers: impl Iterator<Item = Tier>,
        since: Timestamp,
    ) {
        let kinds: BTreeSet<PassKind> = tiers.map(PassKind::for_tier).collect();
        for kind in kinds {
            self.ports.store.mark_pending(memory_ref, kind, since).await;
        }
    }

    fn replay(result: &str) -> Result<PutOutput, CoreError> {
        tracing::info!("put answered from its idempotency record");
        let mut out: PutOutput = serde_json::from_str(result).map_err(|_| {
            CoreError::Store(StoreError::Corrupt {
                key: "idempotency record".into(),
            })
        })?;
        out.replayed = true;
        Ok(out)
    }

    /// A put that takes the place of entries the caller read (an edit of a file of the Claude
    /// memory tool): the new entries are validated and SR-1-redacted exactly as [`Self::put`]
    /// does, then written and `replaces` deleted in one all-or-nothing store write that holds
    /// only if every replaced entry is still the revision the caller read. Two edits racing on
    /// one entry therefore cannot both land: the loser gets `StoreError::Conflict` with nothing
    /// changed, and re-reads. A new entry without a `subject` keeps the subject of the entry it
    /// replaces at the same index, so forget still reaches every later version of it.
    /// Idempotency keys are not taken here: the revision condition already makes a retry safe.
    pub async fn put_replacing(
        &self,
        request: &PutRequest,
        replaces: &[StoredEntry],
    ) -> Result<PutOutput, CoreError> {
        let store = self.ports.store.clone();
        self.put_replacing_with(request, replaces, |stored| async move {
            store.replace(&stored, replaces).await
        })
        .await
    }

    /// [`Self::put_replacing`] whose store write is `write`, given the entries as they will be
    /// stored (validated, redacted, with their ids and subjects): for a caller that must add
    /// conditions of its own to the same all-or-nothing write (the memory tool's path keys). A
    /// `write` that fails leaves the writer having announced and marked nothing.
    pub async fn put_replacing_with<F, Fut>(
        &self,
        request: &PutRequest,
        replaces: &[StoredEntry],
        write: F,
    ) -> Result<PutOutput, CoreError>
    where
        F: FnOnce(Vec<StoredEntry>) -> Fut,
        Fut: std::future::Future<Output = Result<(), StoreError>>,
    {
        if request.idempotency_key.is_some() {
            return Err(CoreError::invalid(
                "idempotencyKey",
                "not taken by a conditional rewrite",
            ));
        }
        let prepared = self.prepare(request)?;
        let (memory_ref, now, redactions) =
            (&prepared.memory_ref, prepared.now, prepared.redactions);
        if replaces.iter().any(|old| old.memory_ref != *memory_ref) {
            return Err(CoreError::RefNotAdmitted);
        }
        let tenant = memory_ref.tenant().clone();
        let mut stored = stored_entries(
            memory_ref,
            &prepared.attribution,
            prepared.validated,
            now,
            |_| self.ids.next_id(now),
            |index| replaces.get(index).and_then(|old| old.subject.clone()),
        );
        let (missing, embedding_refused) = self.embed(&mut stored).await;
        write(stored.clone()).await?;
        self.mark_tiers_pending(memory_ref, stored.iter().map(|e| e.tier), now)
            .await;
        self.embed_later(memory_ref, missing, now).await;
        self.announce_written(memory_ref, &stored).await;
        tracing::info!(
            tenant = %tenant,
            entries = stored.len(),
            replaced = replaces.len(),
            redactions,
            "entries rewritten"
        );
        Ok(PutOutput {
            written: written_of(&stored),
            redactions,
            replayed: false,
            pressure: Vec::new(),
            embedding_refused,
        })
    }

    /// Deletes one entry of the caller's tenant. A malformed or foreign ref or id answers
    /// `false`, like a missing entry, so the reply reveals nothing about other tenants.
    /// With an idempotency key, the first answer is recorded with the delete itself, so a
    /// retry answers `true` again rather than `false` for the entry it already removed.
    pub async fn delete(
        &self,
        tenant_id: &str,
        raw_ref: &str,
        id: &str,
        idempotency_key: Option<&str>,
    ) -> Result<bool, CoreError> {
        let tenant = crate::model::tenant_of(tenant_id)?;
        let key = Self::parse_key(&tenant, idempotency_key)?;
        let Some(memory_ref) = TenantScope::new(tenant).admit(raw_ref) else {
            return Ok(false);
        };
        if !is_valid_entry_id(id) {
            return Ok(false);
        }
        let entry = EntryKey {
            memory_ref,
            id: id.to_owned(),
        };
        let payload = {
            let mut d = PayloadDigest::new("delete");
            d.field(&entry.memory_ref.to_string()).field(&entry.id);
            d.finish()
        };
        let now = self.ports.clock.now();
        let held = match self.begin(key, &payload, now).await? {
            Begun::Proceed(Some(held)) => held,
            Begun::Proceed(None) => return Ok(self.ports.store.delete(&entry).await?),
            Begun::Replay(result) => return Self::replay_delete(&result),
        };
        let completion = |deleted: bool| Completion {
            key: held.key.clone(),
            attempt: held.attempt.clone(),
            result: serde_json::json!({ "deleted": deleted }).to_string(),
        };
        let outcome = match self
            .ports
            .store
            .delete_completing(&entry, &completion(true))
            .await
        {
            Ok(true) => Ok(true),
            Ok(false) => self
                .ports
                .store
                .complete_key(&completion(false))
                .await
                .map(|()| false),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(deleted) => Ok(deleted),
            Err(StoreError::Conflict { .. }) => {
                Self::replay_delete(&self.after_takeover(&held, &payload, now).await?)
            }
            Err(e) => {
                self.release(&held).await;
                Err(e.into())
            }
        }
    }

    fn replay_delete(result: &str) -> Result<bool, CoreError> {
        serde_json::from_str::<serde_json::Value>(result)
            .ok()
            .and_then(|v| v.get("deleted").and_then(serde_json::Value::as_bool))
            .ok_or(CoreError::Store(StoreError::Corrupt {
                key: "idempotency record".into(),
            }))
    }
}

/// The ids and creation times a put answers with.
fn written_of(stored: &[StoredEntry]) -> Vec<Written> {
    stored
        .iter()
        .map(|s| Written {
            id: s.entry.id.clone(),
            created_at: s.entry.created_at,
        })
        .collect()
}
