//! The six tools (docs/api.md "The MCP server"): each a JSON schema generated from its argument
//! type, a description a model can act on, and a call into the same services as the REST doors
//! (`MemoryReader`, the SR-1 `MemoryWriter`, the `Forgetter`). A result is the REST answer's
//! JSON as structured content (and as text); a failure is an MCP tool error whose content is
//! the REST error envelope, with the same code (`validation_error`, `not_found`,
//! `rate_limited`, ...). CTI-1 as on the REST routes: a malformed or other-tenant memoryRef lists
//! and searches empty, gets `not_found`, deletes nothing, and a write to it is
//! `validation_error` on `memoryRef`.

use std::sync::Arc;

use memory_api::{decode, WireError};
use memory_core::forget::Forgetter;
use memory_core::listing::ListOptions;
use memory_core::reader::MemoryReader;
use memory_core::search::{SearchMode, SearchOptions};
use memory_core::tag_filter::TagFilter;
use memory_core::writer::{MemoryWriter, PutRequest, SecretInput};
use memory_core::CoreError;
use memory_guard::{TenantId, TenantScope};
use rmcp::model::{CallToolResult, JsonObject, Tool, ToolAnnotations};
use rmcp::schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

/// The services the tools call, wired by the function exactly as the REST functions wire them.
pub struct Services {
    pub reader: MemoryReader,
    /// Redacts the server's configured SR-1 secrets from every write beside those a
    /// `memory_write` call brings (`MemoryWriter::with_configured_secrets`), which alone count
    /// against the call's maximum.
    pub writer: MemoryWriter,
    pub forgetter: Forgetter,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct SearchArgs {
    /// The memoryRef, `workspaces/{tenantId}/agents/{agentId}/memories`, of the caller's tenant.
    memory_ref: String,
    /// What to look for, in words (1-1024 bytes).
    query: String,
    /// Most results (default 10, at most 100).
    #[serde(default)]
    limit: Option<u32>,
    /// Only entries carrying all of these tags.
    #[serde(default)]
    tags: Vec<String>,
    /// `text` (BM25, the default), or `semantic` / `hybrid` where an embedding model is
    /// configured.
    #[serde(default)]
    mode: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct ListArgs {
    /// The memoryRef, `workspaces/{tenantId}/agents/{agentId}/memories`, of the caller's tenant.
    memory_ref: String,
    /// Only entries carrying all of these tags (at most 8).
    #[serde(default)]
    tags: Vec<String>,
    /// Only entries carrying at least one of these tags (at most 8).
    #[serde(default)]
    any_tags: Vec<String>,
    /// Entries per page (default 50, at most 100).
    #[serde(default)]
    limit: Option<u32>,
    /// `nextCursor` of the previous page.
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct EntryRefArgs {
    /// The memoryRef, `workspaces/{tenantId}/agents/{agentId}/memories`, of the caller's tenant.
    memory_ref: String,
    /// The entry's id.
    id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct WriteArgs {
    /// The memoryRef, `workspaces/{tenantId}/agents/{agentId}/memories`, of the caller's tenant.
    memory_ref: String,
    /// 1-25 entries, written all or none.
    entries: Vec<EntryArg>,
    /// Secret values to redact from the entries before they are stored (SR-1); never stored or
    /// logged. The server's configured secrets are redacted too.
    #[serde(default)]
    secrets: Vec<SecretArg>,
    /// The run that writes (attribution), `[A-Za-z0-9._-]{1,128}`.
    #[serde(default)]
    run_id: Option<String>,
    /// Makes the write happen at most once per key within 24 h (1-255 printable ASCII).
    #[serde(default)]
    idempotency_key: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct EntryArg {
    /// The text to remember (1 byte - 64 KiB).
    content: String,
    /// At most 32 tags of 1-128 bytes.
    #[serde(default)]
    tags: Vec<String>,
    /// RFC 3339 instant after which the entry no longer surfaces.
    #[serde(default)]
    expires_at: Option<String>,
    /// The data subject the entry is about (1-256 bytes), so `memory_forget` can remove it.
    #[serde(default)]
    subject: Option<String>,
    /// `transactional` (default) or `long-term`.
    #[serde(default)]
    tier: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct SecretArg {
    /// A name for the secret (`[A-Za-z0-9._:/@-]{1,128}`); the marker says `[REDACTED:<id>]`.
    secret_id: String,
    /// The secret's value.
    value: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct ForgetArgs {
    /// The data subject (a customer id, an e-mail address...), 1-256 bytes.
    subject: String,
}

fn tool<T: JsonSchema + 'static>(name: &'static str, description: &'static str) -> Tool {
    Tool::new(name, description, JsonObject::new()).with_input_schema::<T>()
}

/// The tools, in the order `tools/list` gives them.
pub fn tools() -> Vec<Tool> {
    let read_only = closed_world(true, false, true);
    vec![
        tool::<SearchArgs>(
            "memory_search",
            "Ranked search of one memoryRef's live entries (BM25 over content and tags, newer \
             versions of a fact first). Returns {results: [{entry, score}]}, best first. A \
             memoryRef that is not yours returns no results.",
        )
        .annotate(read_only.clone()),
        tool::<ListArgs>(
            "memory_list",
            "List one memoryRef's live entries, newest first, optionally filtered by tags. \
             Returns {entries, nextCursor}; pass nextCursor back as cursor for the next page.",
        )
        .annotate(read_only.clone()),
        tool::<EntryRefArgs>(
            "memory_get",
            "Get one entry by id. A missing entry, or a memoryRef that is not yours, is a \
             not_found error.",
        )
        .annotate(read_only),
        tool::<WriteArgs>(
            "memory_write",
            "Store 1-25 entries in one memoryRef, all or none. Every secret value (yours and the \
             server's) is replaced by [REDACTED:<secretId>] before anything is stored. Returns \
             {written: [{id, createdAt}]}.",
        )
        .annotate(closed_world(false, false, false)),
        tool::<EntryRefArgs>(
            "memory_delete",
            "Delete one entry by id. Returns {deleted: true|false}; false when there was no such \
             entry (or the memoryRef is not yours).",
        )
        .annotate(closed_world(false, true, true)),
        tool::<ForgetArgs>(
            "memory_forget",
            "Forget a data subject in your tenant: every entry written with this subject and \
             everything derived from it (distilled entries, archives, index lines, commitments). \
             Returns the counts removed.",
        )
        .annotate(closed_world(false, true, true)),
    ]
}

impl Services {
    /// Runs tool `name` for `tenant`; every failure is a tool error carrying the REST envelope.
    pub async fn call(
        self: &Arc<Self>,
        tenant: Option<&TenantId>,
        name: &str,
        arguments: JsonObject,
    ) -> CallToolResult {
        let outcome = match tenant {
            Some(tenant) => self.dispatch(tenant, name, Value::Object(arguments)).await,
            None => Err(CoreError::NoTenant.into()),
        };
        tracing::info!(
            tenant = tenant.map(TenantId::as_str).unwrap_or("-"),
            tool = name,
            error = outcome.as_ref().err().map(|e| e.code),
            "mcp tool"
        );
        match outcome {
            Ok(value) => CallToolResult::structured(value),
            Err(e) => CallToolResult::structured_error(e.envelope()),
        }
    }

    async fn dispatch(
        &self,
        tenant: &TenantId,
        name: &str,
        arguments: Value,
    ) -> Result<Value, WireError> {
        let scope = TenantScope::new(tenant.clone());
        match name {
            "memory_search" => {
                let a: SearchArgs = decode::typed(arguments, "arguments")?;
                let mode = a.mode.as_deref().map(SearchMode::parse).transpose()?;
                let options = SearchOptions::new(
                    &a.query,
                    TagFilter::new(a.tags, Vec::new())?,
                    a.limit,
                    true,
                )?
                .with_mode(mode.unwrap_or_default());
                let results = self.reader.search(&scope, &a.memory_ref, &options).await?;
                Ok(json!(results))
            }
            "memory_list" => {
                let a: ListArgs = decode::typed(arguments, "arguments")?;
                let options = ListOptions {
                    limit: a.limit,
                    tags: TagFilter::new(a.tags, a.any_tags)?,
                    cursor: a.cursor,
                };
                if options.limit == Some(0) {
                    return Err(CoreError::BadLimit.into());
                }
                Ok(json!(
                    self.reader.list(&scope, &a.memory_ref, &options).await?
                ))
            }
            "memory_get" => {
                let a: EntryRefArgs = decode::typed(arguments, "arguments")?;
                let entry = self.reader.get(&scope, &a.memory_ref, &a.id).await?;
                Ok(json!(entry.ok_or(CoreError::NotFound)?))
            }
            "memory_write" => {
                let a: WriteArgs = decode::typed(arguments, "arguments")?;
                let secrets: Vec<SecretInput> = decode::typed(
                    Value::Array(
                        a.secrets
                            .into_iter()
                            .map(|s| json!({"secretId": s.secret_id, "value": s.value}))
                            .collect(),
                    ),
                    "arguments.secrets",
                )?;
                let entries = decode::typed(
                    Value::Array(
                        a.entries
                            .into_iter()
                            .map(|e| {
                                json!({"content": e.content, "tags": e.tags,
                                       "expiresAt": e.expires_at, "subject": e.subject,
                                       "tier": e.tier})
                            })
                            .collect(),
                    ),
                    "arguments.entries",
                )?;
                let request = PutRequest {
                    tenant_id: tenant.as_str().to_owned(),
                    run_id: a.run_id,
                    memory_ref: a.memory_ref,
                    entries,
                    secrets,
                    attribution: Default::default(),
                    idempotency_key: a.idempotency_key,
                };
                Ok(json!(self.writer.put(&request).await?))
            }
            "memory_delete" => {
                let a: EntryRefArgs = decode::typed(arguments, "arguments")?;
                let deleted = self
                    .writer
                    .delete(tenant.as_str(), &a.memory_ref, &a.id, None)
                    .await?;
                Ok(json!({ "deleted": deleted }))
            }
            "memory_forget" => {
                let a: ForgetArgs = decode::typed(arguments, "arguments")?;
                Ok(json!(
                    self.forgetter.forget(tenant.as_str(), &a.subject).await?
                ))
            }
            _ => Err(WireError::validation("name", "no such tool")),
        }
    }
}

/// The hints every tool carries: none of them reaches outside this memory (`open_world` false).
fn closed_world(read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(false)
}
