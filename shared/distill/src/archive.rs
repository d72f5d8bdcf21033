//! The distillation archive — RFC 0062 run contract §4 ("an immutable, addressable artifact,
//! byte-stable for a given source set + budget"), RFC 0012 §B/§C (provenance: the source ids and
//! the output entry).
//!
//! The archive is named by [`archive_digest`] over exactly what determines its bytes — the
//! sources (ids, contents, tags, timestamps), the budget, the distiller version and the
//! tokenizer — and holds nothing else that varies: no run id, no wall-clock time, no request id.
//! So a rerun over the same snapshot and budget produces the same key and the same bytes, and a
//! put-if-absent makes it a no-op. Run-specific facts (the run id for the `compacted-from:` tag,
//! the run's start time) belong on the long-term entry and the `memory.compacted` event instead.
//!
//! Every source of the run is listed in `sourceIds` (all of them are consumed by the run, see
//! [`crate::distiller`] rule step 2); `sourcesIncluded` says how many of them have a fact in the
//! summary, and `inputTokens` counts exactly those.
//!
//! Example (`to_bytes` writes it on one line; wrapped here):
//!
//! ```text
//! {"format":"wop-memory.archive/v2","digest":"3f1c…(64 hex)","tenantId":"t-1",
//!  "memoryRef":"workspaces/t-1/agents/a-1/memories","distillerVersion":"wop-memory.deterministic/4",
//!  "tokenizer":"cl100k_base","tokenBudget":100000,"tokensUsed":171,"inputTokens":120,
//!  "outputTokens":51,"inputCount":3,"sourceCount":3,"sourcesIncluded":3,
//!  "sourceIds":["01J…A","01J…B","01J…C"],"outputEntryId":"01JD…",
//!  "outputCreatedAt":"2026-11-20T17:00:00.000Z",
//!  "summary":"## preference\n- Customer prefers email (x2, latest 2026-11-20)\n…"}
//! ```
//!
//! Version 1 documents (written before every source was consumed: `sourceIds` were the sources
//! used, no `sourcesIncluded`) still read back, with `sourcesIncluded = sourceCount`.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

#[cfg(feature = "distiller")]
use crate::distiller::{DistillInput, Distillation, Distiller, SourceEntry};
use crate::json::canonical_bytes;
use crate::keys;
use crate::time;
use crate::DistillError;

/// The `capabilities.memory.distillation.tokenizerName` this crate counts with.
pub const TOKENIZER_NAME: &str = "cl100k_base";

/// `format` of every archive this version writes.
pub const ARCHIVE_FORMAT: &str = "wop-memory.archive/v2";

/// The format before `sourcesIncluded`; read, never written.
const ARCHIVE_FORMAT_V1: &str = "wop-memory.archive/v1";

#[cfg(feature = "distiller")]
const DIGEST_DOMAIN: &str = "wop-memory.archive-digest/v1";
const ENTRY_ID_DOMAIN: &str = "wop-memory.output-entry-id/v1";
const ULID_MAX_MS: i64 = (1 << 48) - 1;

/// The immutable archive document of one distillation run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// [`archive_digest`] of the run's input; also the last segment of the key.
    pub digest: String,
    pub tenant_id: String,
    pub memory_ref: String,
    pub distiller_version: String,
    /// Always [`TOKENIZER_NAME`] for archives this crate builds.
    pub tokenizer: String,
    pub token_budget: u32,
    pub tokens_used: u32,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Sources offered to the run (the snapshot). Since version 2 every one is consumed, so
    /// `source_count` equals it.
    pub input_count: u32,
    pub source_count: u32,
    /// Sources with at least one fact in the summary: the ones `input_tokens` counts.
    pub sources_included: u32,
    /// Ids of the run's sources, sorted ascending: the provenance forget follows.
    pub source_ids: Vec<String>,
    /// Id of the long-term entry carrying `summary` ([`output_entry_id`]).
    pub output_entry_id: String,
    /// That entry's `createdAt`: the newest source's, never the clock.
    pub output_created_at_ms: i64,
    /// The distilled text, after SR-1 carry-forward.
    pub summary: String,
}

fn length_prefixed(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

#[cfg(feature = "distiller")]
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// SHA-256 (lowercase hex) naming the archive of distilling `sources` under `budget` with
/// `distiller_version`.
///
/// Canonical encoding, every variable-length field prefixed with its length as a big-endian
/// u64 so no two different inputs concatenate to the same bytes: the domain string, the
/// distiller version, the tokenizer name, the budget (u32 BE), the source count (u64 BE), then per
/// source in (id, content, createdAt, tags) order: id, content, `createdAt` ms (i64 BE), and the
/// sorted, de-duplicated tags (count u64 BE, then each tag). Input order does not matter.
///
/// Tags and timestamps are included, not only ids and contents: they decide
/// the sections and the input choice, so leaving them out would let two different outputs share
/// a key.
#[cfg(feature = "distiller")]
pub fn archive_digest(sources: &[SourceEntry], budget: u32, distiller_version: &str) -> String {
    let mut ordered: Vec<(&SourceEntry, Vec<&str>)> = sources
        .iter()
        .map(|s| {
            let mut tags: Vec<&str> = s.tags.iter().map(String::as_str).collect();
            tags.sort_unstable();
            tags.dedup();
            (s, tags)
        })
        .collect();
    ordered.sort_by(|(a, at), (b, bt)| {
        (&a.id, &a.content, a.created_at_ms, at).cmp(&(&b.id, &b.content, b.created_at_ms, bt))
    });
    let mut hasher = Sha256::new();
    length_prefixed(&mut hasher, DIGEST_DOMAIN.as_bytes());
    length_prefixed(&mut hasher, distiller_version.as_bytes());
    length_prefixed(&mut hasher, TOKENIZER_NAME.as_bytes());
    hasher.update(budget.to_be_bytes());
    hasher.update((ordered.len() as u64).to_be_bytes());
    for (source, tags) in &ordered {
        length_prefixed(&mut hasher, source.id.as_bytes());
        length_prefixed(&mut hasher, source.content.as_bytes());
        hasher.update(source.created_at_ms.to_be_bytes());
        hasher.update((tags.len() as u64).to_be_bytes());
        for tag in tags {
            length_prefixed(&mut hasher, tag.as_bytes());
        }
    }
    hex(&hasher.finalize())
}

/// Deterministic ULID of the long-term entry a run writes: time part `created_at_ms` (clamped to
/// the 48-bit ULID range), random part the first 80 bits of SHA-256 over a domain string and
/// `digest`. A rerun of the same archive therefore writes the same entry id, so the entry's
/// put-if-absent is as idempotent as the archive's.
pub fn output_entry_id(digest: &str, created_at_ms: i64) -> String {
    let mut hasher = Sha256::new();
    length_prefixed(&mut hasher, ENTRY_ID_DOMAIN.as_bytes());
    length_prefixed(&mut hasher, digest.as_bytes());
    let hash = hasher.finalize();
    let mut random = [0_u8; 16];
    random[6..].copy_from_slice(&hash[..10]);
    let ms = created_at_ms.clamp(0, ULID_MAX_MS) as u64;
    ulid::Ulid::from_parts(ms, u128::from_be_bytes(random)).to_string()
}

impl Archive {
    /// Assembles the archive of a finished run. `distillation` must come from `distiller_version`
    /// over `input` (and carry the carry-forward summary); the memoryRef must be canonical and
    /// belong to `tenant_id`.
    #[cfg(feature = "distiller")]
    pub fn new(
        tenant_id: &str,
        memory_ref: &str,
        input: &DistillInput,
        distiller_version: &str,
        distillation: &Distillation,
    ) -> Result<Self, DistillError> {
        keys::check_tenant(tenant_id, memory_ref)?;
        if distillation.token_budget != input.token_budget {
            return Err(DistillError::MalformedArchive(
                "distillation was made under another budget",
            ));
        }
        let digest = archive_digest(&input.sources, input.token_budget, distiller_version);
        let mut source_ids: Vec<String> = input.sources.iter().map(|s| s.id.clone()).collect();
        source_ids.sort_unstable();
        let included = &distillation.included_source_ids;
        if included
            .iter()
            .any(|id| source_ids.binary_search(id).is_err())
        {
            return Err(DistillError::MalformedArchive(
                "distillation names a source the input does not hold",
            ));
        }
        Ok(Self {
            output_entry_id: output_entry_id(&digest, distillation.newest_source_ms),
            digest,
            tenant_id: tenant_id.to_owned(),
            memory_ref: memory_ref.to_owned(),
            distiller_version: distiller_version.to_owned(),
            tokenizer: TOKENIZER_NAME.to_owned(),
            token_budget: input.token_budget,
            tokens_used: distillation.tokens_used,
            input_tokens: distillation.input_tokens,
            output_tokens: distillation.output_tokens,
            input_count: u32::try_from(input.sources.len()).unwrap_or(u32::MAX),
            source_count: u32::try_from(source_ids.len()).unwrap_or(u32::MAX),
            sources_included: u32::try_from(included.len()).unwrap_or(u32::MAX),
            source_ids,
            output_created_at_ms: distillation.newest_source_ms,
            summary: distillation.summary.clone(),
        })
    }

    /// `{tenantId}/agents/{agentId}/archives/{digest}.json`.
    pub fn key(&self) -> Result<String, DistillError> {
        keys::archive_key(&self.memory_ref, &self.digest)
    }

    /// Canonical bytes; see [`to_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        to_bytes(self)
    }

    /// Reads archive bytes back (forget and recursive distillation need the provenance).
    /// Rejects other formats, unknown fields and inconsistent documents.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DistillError> {
        let wire: Wire = serde_json::from_slice(bytes)
            .map_err(|_| DistillError::MalformedArchive("not an archive document"))?;
        let sources_included = match (wire.format.as_str(), wire.sources_included) {
            (ARCHIVE_FORMAT, Some(n)) if n <= wire.source_count => n,
            (ARCHIVE_FORMAT_V1, None) => wire.source_count,
            (ARCHIVE_FORMAT | ARCHIVE_FORMAT_V1, _) => {
                return Err(DistillError::MalformedArchive("bad sourcesIncluded"))
            }
            _ => return Err(DistillError::MalformedArchive("unknown format")),
        };
        if !keys::is_digest(&wire.digest) {
            return Err(DistillError::MalformedArchive("bad digest"));
        }
        keys::check_tenant(&wire.tenant_id, &wire.memory_ref)
            .map_err(|_| DistillError::MalformedArchive("bad memoryRef or tenant"))?;
        let created = time::parse_rfc3339_ms(&wire.output_created_at)
            .ok_or(DistillError::MalformedArchive("bad outputCreatedAt"))?;
        let sorted = wire.source_ids.windows(2).all(|p| p[0] < p[1]);
        if !sorted || wire.source_ids.len() != wire.source_count as usize {
            return Err(DistillError::MalformedArchive("bad sourceIds"));
        }
        if u64::from(wire.tokens_used)
            != u64::from(wire.input_tokens) + u64::from(wire.output_tokens)
            || wire.tokens_used > wire.token_budget
        {
            return Err(DistillError::MalformedArchive("inconsistent token figures"));
        }
        Ok(Self {
            digest: wire.digest,
            tenant_id: wire.tenant_id,
            memory_ref: wire.memory_ref,
            distiller_version: wire.distiller_version,
            tokenizer: wire.tokenizer,
            token_budget: wire.token_budget,
            tokens_used: wire.tokens_used,
            input_tokens: wire.input_tokens,
            output_tokens: wire.output_tokens,
            input_count: wire.input_count,
            source_count: wire.source_count,
            sources_included,
            source_ids: wire.source_ids,
            output_entry_id: wire.output_entry_id,
            output_created_at_ms: created,
            summary: wire.summary,
        })
    }
}

/// The document as stored; field order is byte order (see `json`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Wire {
    format: String,
    digest: String,
    tenant_id: String,
    memory_ref: String,
    distiller_version: String,
    tokenizer: String,
    token_budget: u32,
    tokens_used: u32,
    input_tokens: u32,
    output_tokens: u32,
    input_count: u32,
    source_count: u32,
    /// Absent in version 1 documents only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sources_included: Option<u32>,
    source_ids: Vec<String>,
    output_entry_id: String,
    output_created_at: String,
    summary: String,
}

/// Canonical JSON of `archive` in format v2 (a v1 document read back is written as v2): fixed
/// field order (as in the module example), no whitespace, integers only, minimal string
/// escaping, one trailing `\n` (see `json`). Equal archives give equal bytes on every platform
/// and version of this crate that writes format v2.
pub fn to_bytes(archive: &Archive) -> Vec<u8> {
    canonical_bytes(&Wire {
        format: ARCHIVE_FORMAT.to_owned(),
        digest: archive.digest.clone(),
        tenant_id: archive.tenant_id.clone(),
        memory_ref: archive.memory_ref.clone(),
        distiller_version: archive.distiller_version.clone(),
        tokenizer: archive.tokenizer.clone(),
        token_budget: archive.token_budget,
        tokens_used: archive.tokens_used,
        input_tokens: archive.input_tokens,
        output_tokens: archive.output_tokens,
        input_count: archive.input_count,
        source_count: archive.source_count,
        sources_included: Some(archive.sources_included),
        source_ids: archive.source_ids.clone(),
        output_entry_id: archive.output_entry_id.clone(),
        output_created_at: time::format_rfc3339_ms(archive.output_created_at_ms),
        summary: archive.summary.clone(),
    })
}

/// The whole pure pipeline of a run: distil, apply SR-1 carry-forward, assemble the archive.
///
/// `carry_forward` is the run's redactor (RFC 0012 §D: derived content goes through the same
/// harness as a fresh put, whatever the sources already were). It must be deterministic for a
/// given registry; the summary is recounted after it and the run fails with
/// `token_budget_exceeded` if redaction pushed it over the budget. The tenant/ref check runs
/// before the distiller so a CTI-1 violation costs nothing.
#[cfg(feature = "distiller")]
pub fn build_archive(
    tenant_id: &str,
    memory_ref: &str,
    input: &DistillInput,
    distiller: &dyn Distiller,
    carry_forward: impl FnOnce(&str) -> String,
) -> Result<(Archive, Distillation), DistillError> {
    keys::check_tenant(tenant_id, memory_ref)?;
    let distillation = distiller.distill(input)?;
    let redacted = carry_forward(&distillation.summary);
    let distillation = distillation.with_summary(redacted)?;
    let archive = Archive::new(
        tenant_id,
        memory_ref,
        input,
        distiller.version(),
        &distillation,
    )?;
    Ok((archive, distillation))
}

#[cfg(all(test, feature = "distiller"))]
mod tests {
    use super::*;

    #[test]
    fn entry_id_is_a_ulid_with_the_given_time() {
        let digest = "ab".repeat(32);
        let id = output_entry_id(&digest, 1_795_132_800_000);
        let parsed = ulid::Ulid::from_string(&id)
            .map_err(|_| ())
            .map(|u| u.timestamp_ms());
        assert_eq!(parsed, Ok(1_795_132_800_000));
        assert_eq!(id, output_entry_id(&digest, 1_795_132_800_000));
        assert_ne!(id, output_entry_id(&"cd".repeat(32), 1_795_132_800_000));
        // Out-of-range instants clamp instead of wrapping.
        let early =
            ulid::Ulid::from_string(&output_entry_id(&digest, -5)).map(|u| u.timestamp_ms());
        assert_eq!(early.ok(), Some(0));
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
    }
}
