//! Plans one consolidation pass over a labelled corpus for the memory-quality benchmark
//! (`tests/quality/bench.py`): one JSON document on stdin, `{"entries": [{"id", "content",
//! "tags", "createdAtMs", "subject"?}]}`, one on stdout, `{"inputCount", "outputCount",
//! "merges": [{"kind": "duplicate" | "supersede", "replaced": [ids], "merged": {"id",
//! "content", "tags", "provenance"}}]}`, with the default settings a pass uses.

use std::io::Read;

use consolidation::{plan, plan_with, Entry, MergeKind, Semantic, Settings, DEFAULT_MIN_COSINE};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Input {
    entries: Vec<InputEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InputEntry {
    id: String,
    content: String,
    #[serde(default)]
    tags: Vec<String>,
    created_at_ms: i64,
    subject: Option<String>,
    /// Optional: turns on the embedding stage (all vectors of one model).
    #[serde(default)]
    embedding: Option<Vec<f32>>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw)?;
    let mut input: Input = serde_json::from_str(&raw)?;
    let vectors: Vec<Option<Vec<f32>>> = input
        .entries
        .iter_mut()
        .map(|e| e.embedding.take())
        .collect();
    let entries: Vec<Entry> = input
        .entries
        .into_iter()
        .map(|e| Entry {
            id: e.id,
            content: e.content,
            tags: e.tags,
            created_at_ms: e.created_at_ms,
            expires_at_ms: None,
            subject: e.subject,
            provenance: Vec::new(),
        })
        .collect();
    let slices: Vec<Option<&[f32]>> = vectors.iter().map(|v| v.as_deref()).collect();
    let min_cosine = std::env::var("MIN_COSINE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MIN_COSINE);
    let semantic = Semantic {
        vectors: &slices,
        min_cosine,
    };
    let planned = if slices.iter().any(Option::is_some) {
        plan_with(&entries, &Settings::default(), Some(&semantic))
    } else {
        plan(&entries, &Settings::default())
    };
    let merges: Vec<_> = planned
        .merges
        .iter()
        .map(|m| {
            json!({
                "kind": match m.kind {
                    MergeKind::Duplicate => "duplicate",
                    MergeKind::Supersede => "supersede",
                },
                "replaced": m.replaced,
                "merged": {
                    "id": m.merged.id,
                    "content": m.merged.content,
                    "tags": m.merged.tags,
                    "provenance": m.merged.provenance,
                },
            })
        })
        .collect();
    let out = json!({
        "inputCount": planned.input_count,
        "outputCount": planned.output_count,
        "merges": merges,
    });
    println!("{out}");
    Ok(())
}
