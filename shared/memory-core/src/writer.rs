//! The SR-1 write chokepoint (`writeAgentMemoryRedacted` of the spec's reference pattern): every
//! string that will be persisted passes through the run's redactor before it reaches a port,
//! and the run's secrets live only in this call's memory. Also the host-internal delete.
//!
//! A request is validated whole before anything is written, and the write itself is one
//! all-or-nothing store call, so a rejected or failed request leaves nothing behind.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::events::DomainEvent;
use crate::model::{
    is_valid_entry_id, Attribution, EntryKey, MemoryEntry, NewEntry, StoredEntry, SubjectKey, Tier,
};
use crate::ports::{Clock, EntryStore, EventPublisher, IdSource};
use crate::time::Timestamp;
use memory_guard::{Redactor, SecretRegistry, TenantId, TenantScope};

/// Bounds of one write request (README §Limits). Content is bounded after redaction too, since a
/// marker can be longer than the secret it replaces; 64 KiB keeps an item far below DynamoDB's
/// 400 KB with tags and attributes included.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
pub const MAX_TAGS: usize = 32;
pub const MAX_TAG_BYTES: usize = 128;
pub const MAX_ENTRIES_PER_REQUEST: usize = 25;
pub const MAX_SUBJECT_BYTES: usize = 256;
pub const MAX_SECRETS_PER_REQUEST: usize = 10_000;

#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretInput {
    pub secret_id: String,
    pub value: String,
}

/// Only the id: a secret value must not reach a log line through `{:?}`.
impl fmt::Debug for SecretInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretInput")
            .field("secret_id", &self.secret_id)
            .finish_non_exhaustive()
    }
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
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttributionInput {
    #[serde(default)]
    pub node_id: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub id: String,
    pub created_at: Timestamp,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PutOutput {
    pub written: Vec<Written>,
    /// Not on the wire: for metrics.
    #[serde(skip)]
    pub redactions: usize,
}

#[derive(Clone)]
pub struct MemoryWriter {
    store: Arc<dyn EntryStore>,
    publisher: Arc<dyn EventPublisher>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdSource>,
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
    if secrets.len() > MAX_SECRETS_PER_REQUEST {
        return Err(CoreError::invalid(
            "secrets",
            format!("at most {MAX_SECRETS_PER_REQUEST} per request"),
        ));
    }
    let mut registry = SecretRegistry::new();
    for (i, s) in secrets.iter().enumerate() {
        registry
            .register(s.secret_id.clone(), s.value.clone())
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
    Ok(registry)
}

/// The schema path of one entry's field, as error messages name it.
fn entry_field(index: usize, name: &str) -> String {
    format!("entries[{index}].{name}")
}

/// Validates one entry against the documented bounds, with nothing of its text in the error.
fn validate_entry(index: usize, input: &EntryInput, now: Timestamp) -> Result<NewEntry, CoreError> {
    let field = |name: &str| entry_field(index, name);
    if input.content.is_empty() {
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
        if tag.is_empty() || tag.len() > MAX_TAG_BYTES || tag.chars().any(char::is_control) {
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
    pub fn new(
        store: Arc<dyn EntryStore>,
        publisher: Arc<dyn EventPublisher>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
    ) -> Self {
        MemoryWriter {
            store,
            publisher,
            clock,
            ids,
        }
    }

    /// Validates, redacts, stores all entries in one all-or-nothing write, then announces each
    /// with a content-free `memory.written`.
    pub async fn put(&self, request: &PutRequest) -> Result<PutOutput, CoreError> {
        let tenant = TenantId::parse(&request.tenant_id)
            .map_err(|_| CoreError::invalid("tenantId", "must be 1-128 of [A-Za-z0-9._-]"))?;
        let memory_ref = TenantScope::new(tenant.clone())
            .admit(&request.memory_ref)
            .ok_or(CoreError::RefNotAdmitted)?;
        check_opt_id("runId", &request.run_id)?;
        check_opt_id("attribution.nodeId", &request.attribution.node_id)?;
        check_opt_id("attribution.agentId", &request.attribution.agent_id)?;
        if request.entries.is_empty() || request.entries.len() > MAX_ENTRIES_PER_REQUEST {
            return Err(CoreError::invalid(
                "entries",
                format!("1-{MAX_ENTRIES_PER_REQUEST} entries per request"),
            ));
        }
        let now = self.clock.now();
        let redactor = registry_from(&request.secrets)?.redactor();
        let mut redactions = 0;
        let mut validated = Vec::with_capacity(request.entries.len());
        for (index, input) in request.entries.iter().enumerate() {
            let mut entry = validate_entry(index, input, now)?;
            redactions += redact_entry(index, &mut entry, &redactor)?;
            validated.push(entry);
        }
        let attribution = Attribution {
            run_id: request.run_id.clone(),
            node_id: request.attribution.node_id.clone(),
            agent_id: request.attribution.agent_id.clone(),
        };
        let stored: Vec<StoredEntry> = validated
            .into_iter()
            .map(|e| StoredEntry {
                memory_ref: memory_ref.clone(),
                entry: MemoryEntry {
                    id: self.ids.next_id(now),
                    content: e.content,
                    tags: e.tags,
                    created_at: now,
                    expires_at: e.expires_at,
                },
                tier: e.tier,
                subject: e.subject.as_deref().map(|s| SubjectKey::derive(&tenant, s)),
                attribution: attribution.clone(),
                provenance: Vec::new(),
            })
            .collect();
        self.store.put_entries(&stored).await?;

        let events: Vec<DomainEvent> = stored
            .iter()
            .map(|s| {
                DomainEvent::memory_written(
                    &memory_ref,
                    &s.entry.id,
                    s.entry.created_at,
                    s.tier,
                    &s.entry.tags,
                    &s.attribution,
                )
            })
            .collect();
        // The entries are durable at this point; failing the call now would invite a retry that
        // writes them twice. Publishing already retried inside the adapter, so report and go on.
        if let Err(e) = self.publisher.publish(&events).await {
            tracing::error!(error = %e, events = events.len(), "memory.written not published");
        }
        tracing::info!(
            tenant = %tenant,
            entries = stored.len(),
            redactions,
            "entries written"
        );
        Ok(PutOutput {
            written: stored
                .iter()
                .map(|s| Written {
                    id: s.entry.id.clone(),
                    created_at: s.entry.created_at,
                })
                .collect(),
            redactions,
        })
    }

    /// Deletes one entry of the caller's tenant. A malformed or foreign ref or id answers
    /// `false`, like a missing entry, so the reply reveals nothing about other tenants.
    pub async fn delete(
        &self,
        tenant_id: &str,
        raw_ref: &str,
        id: &str,
    ) -> Result<bool, CoreError> {
        let tenant = TenantId::parse(tenant_id)
            .map_err(|_| CoreError::invalid("tenantId", "must be 1-128 of [A-Za-z0-9._-]"))?;
        let Some(memory_ref) = TenantScope::new(tenant).admit(raw_ref) else {
            return Ok(false);
        };
        if !is_valid_entry_id(id) {
            return Ok(false);
        }
        Ok(self
            .store
            .delete(&EntryKey {
                memory_ref,
                id: id.to_owned(),
            })
            .await?)
    }
}
