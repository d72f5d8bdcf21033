//! RFC 0080 §A/§C: one description of what this host's memory can do drives both the capability
//! advertisement and the degraded projection of an agent's `memoryShape`, so the two can never
//! disagree. The advertisement is a claim (spec §Capability advertisement): a feature is set to
//! `supported: true` here only once its function ships.

use serde_json::{json, Value};

use crate::listing::MAX_LIST_LIMIT;

/// The reconciled memory model of RFC 0080 §A, as this host implements it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostMemoryModel {
    pub read: bool,
    pub write: bool,
    pub search_filter: bool,
    pub long_term: bool,
    pub compaction: bool,
    pub attribution: bool,
    pub replay_snapshot: bool,
    pub ttl: bool,
    pub forget: bool,
    pub distillation: Option<DistillationModel>,
    pub consolidation: bool,
    pub commitments: bool,
    /// The embedding model semantic search runs on; `None`: no embedder is configured, and
    /// only `filter` (plus the ranked text route) is advertised.
    pub embedding_model: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistillationModel {
    pub max_token_budget: u32,
    pub tokenizer_name: &'static str,
    /// ISO-8601 duration.
    pub archive_retention: &'static str,
    pub index_emitted: bool,
}

/// Largest token budget a dream accepts (requests above it are clamped); advertised here so the
/// read function can answer the capability document without linking the distiller.
pub const MAX_TOKEN_BUDGET: u32 = 128_000;

/// The tokenizer dreams count with (the dream service checks it equals the distiller's).
pub const TOKENIZER_NAME: &str = "cl100k_base";

/// What this build of wop-memory provides.
pub const HOST_MODEL: HostMemoryModel = HostMemoryModel {
    read: true,
    write: true,
    search_filter: true,
    long_term: true,
    compaction: true,
    attribution: true,
    // Replay re-reads the run log's snapshot, which is the run engine's, not this host's.
    replay_snapshot: false,
    ttl: true,
    forget: true,
    distillation: Some(DistillationModel {
        max_token_budget: MAX_TOKEN_BUDGET,
        tokenizer_name: TOKENIZER_NAME,
        archive_retention: "P90D",
        index_emitted: true,
    }),
    consolidation: true,
    commitments: true,
    embedding_model: None,
};

/// The §A dimension names, the closed enum `degradedMemoryDimensions` draws from.
pub const DIMENSIONS: [&str; 8] = [
    "read",
    "write",
    "search",
    "long-term-durability",
    "compaction",
    "attribution",
    "replay-snapshot",
    "retention",
];

impl HostMemoryModel {
    /// This host as deployed: semantic search when an embedding model is configured.
    pub fn with_embedding_model(mut self, model: Option<String>) -> Self {
        self.embedding_model = model;
        self
    }

    fn satisfies(&self, dimension: &str) -> bool {
        match dimension {
            "read" => self.read,
            "write" => self.write,
            "search" => self.search_filter,
            "long-term-durability" => self.long_term,
            "compaction" => self.compaction || self.distillation.is_some(),
            "attribution" => self.attribution,
            "replay-snapshot" => self.replay_snapshot,
            "retention" => self.ttl && self.forget,
            _ => false,
        }
    }

    /// The capability document served at `/v1/host/wop-memory/capabilities`.
    pub fn document(&self) -> Value {
        let distillation = match &self.distillation {
            Some(d) => json!({
                "supported": true,
                "maxTokenBudget": d.max_token_budget,
                "tokenizerName": d.tokenizer_name,
                "archiveRetention": d.archive_retention,
                "indexEmitted": d.index_emitted,
            }),
            None => json!({"supported": false}),
        };
        let mut search_modes = Vec::new();
        if self.search_filter {
            search_modes.push("filter");
        }
        let mut ranked_modes = vec!["text"];
        if self.embedding_model.is_some() {
            if self.search_filter {
                search_modes.push("semantic");
            }
            ranked_modes.extend(["semantic", "hybrid"]);
        }
        json!({
            "memory": {
                "supported": self.read,
                "writable": self.write,
                "ttlSupported": self.ttl,
                "search": {"supported": self.search_filter, "modes": search_modes},
                "retention": {"ttl": self.ttl, "forget": self.forget},
                "attribution": {"supported": self.attribution, "emitsWriteEvents": self.attribution},
                "compaction": if self.compaction { json!({"supported": true, "trigger": "host-managed"}) } else { json!({"supported": false}) },
                "distillation": distillation,
                "list": {"maxLimit": MAX_LIST_LIMIT},
                // Host extension (not an RFC 0080 field): the ranked text route beside the
                // advertised `filter` search; docs/search.md "Ranked text search".
                "x-wop-memory-search": {
                    "route": "/v1/host/wop-memory/search",
                    "ranking": "bm25",
                    "k1": text_search::K1,
                    "b": text_search::B,
                    "analyzer": "uax29-words+casefold+accentfold+cjk-bigrams+english-stopwords+possessives+identifier-parts",
                    "stemming": "english-snowball (default on; stem=false turns it off)",
                    "maxLimit": MAX_LIST_LIMIT,
                    "modes": ranked_modes,
                    "embeddingModel": self.embedding_model,
                    "fusion": {"method": "convex", "textWeight": text_search::similarity::TEXT_WEIGHT},
                    "newerWithin": text_search::recency::NEWER_WITHIN,
                },
                // Host extension: the OpenIntent RFC-0015 door onto the same memory
                // (docs/openintent.md), as its spec asks extensions to be discoverable.
                "x-wop-memory-openintent": {
                    "spec": "openintent-rfc-0015",
                    "basePath": "/api/v1",
                    "auth": ["X-API-Key", "X-Agent-ID"],
                    "tiers": ["working", "episodic", "semantic"],
                    "concurrency": "If-Match",
                    "versions": true,
                    "taskArchive": "/api/v1/tasks/{task_id}/memory:archive",
                    "maxValueBytes": 65536,
                    "forget": true,
                },
            },
            "agents": {
                "memoryBackends": if self.long_term { json!(["long-term"]) } else { json!([]) },
                "memoryConsolidation": {"supported": self.consolidation},
                "commitments": {"supported": self.commitments},
            }
        })
    }

    /// RFC 0080 §C: the §A dimensions an agent's `memoryShape` asks for that this host cannot
    /// honour, in §A order. Empty means fully satisfied (the inventory then omits the fields).
    /// `scratchpad` and `conversation` need read and write; `longTerm` also needs durability;
    /// keys named after a §A dimension (e.g. `"search": true`) ask for that dimension.
    pub fn degraded_dimensions(&self, memory_shape: &Value) -> Vec<&'static str> {
        let Some(shape) = memory_shape.as_object() else {
            return Vec::new();
        };
        let wants = |key: &str| shape.get(key).and_then(Value::as_bool).unwrap_or(false);
        let mut needed: Vec<&'static str> = Vec::new();
        if wants("scratchpad") || wants("conversation") || wants("longTerm") {
            needed.extend(["read", "write"]);
        }
        if wants("longTerm") {
            needed.push("long-term-durability");
        }
        needed.extend(DIMENSIONS.iter().copied().filter(|d| wants(d)));
        DIMENSIONS
            .iter()
            .copied()
            .filter(|d| needed.contains(d) && !self.satisfies(d))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertisement_matches_the_model() {
        let doc = HOST_MODEL.document();
        assert_eq!(doc["memory"]["supported"], true);
        assert_eq!(doc["memory"]["writable"], true);
        assert_eq!(doc["memory"]["search"]["modes"], json!(["filter"]));
        let x = &doc["memory"]["x-wop-memory-search"];
        assert_eq!(x["modes"], json!(["text"]));
        assert_eq!(x["embeddingModel"], json!(null));
        let semantic = HOST_MODEL
            .with_embedding_model(Some("amazon.titan-embed-text-v2:0".into()))
            .document();
        assert_eq!(
            semantic["memory"]["search"]["modes"],
            json!(["filter", "semantic"])
        );
        let x = &semantic["memory"]["x-wop-memory-search"];
        assert_eq!(x["modes"], json!(["text", "semantic", "hybrid"]));
        assert_eq!(x["embeddingModel"], "amazon.titan-embed-text-v2:0");
        assert_eq!(
            doc["memory"]["retention"],
            json!({"ttl": true, "forget": true})
        );
        assert_eq!(doc["memory"]["list"]["maxLimit"], MAX_LIST_LIMIT);
        assert_eq!(doc["agents"]["memoryBackends"], json!(["long-term"]));
    }

    #[test]
    fn full_host_degrades_nothing_it_provides() {
        let shape = json!({"scratchpad": true, "longTerm": true, "search": true});
        assert!(HOST_MODEL.degraded_dimensions(&shape).is_empty());
    }

    #[test]
    fn read_only_host_without_long_term_is_degraded_per_rfc_example() {
        let read_only = HostMemoryModel {
            write: false,
            long_term: false,
            ..HOST_MODEL
        };
        assert_eq!(
            read_only.degraded_dimensions(&json!({"longTerm": true})),
            vec!["write", "long-term-durability"]
        );
        assert_eq!(read_only.document()["agents"]["memoryBackends"], json!([]));
    }

    #[test]
    fn unmet_requested_dimension_is_reported() {
        let shape = json!({"compaction": true, "replay-snapshot": true, "longTerm": false});
        assert_eq!(
            HOST_MODEL.degraded_dimensions(&shape),
            vec!["replay-snapshot"],
            "compaction is provided (dreams), replay snapshots are the run engine's"
        );
        let no_compaction = HostMemoryModel {
            compaction: false,
            distillation: None,
            ..HOST_MODEL
        };
        assert_eq!(
            no_compaction.degraded_dimensions(&shape),
            vec!["compaction", "replay-snapshot"]
        );
        assert!(HOST_MODEL
            .degraded_dimensions(&json!("nonsense"))
            .is_empty());
    }
}
