//! Distils one JSON document from standard input and prints what made it in — the measurement
//! behind the quality benchmark's "distillation coverage at budgets 256 / 1,000 / 4,000"
//! (`tests/quality/bench.py`):
//!
//! ```text
//! {"budget": 256, "sources": [{"id", "content", "tags", "createdAtMs"}, ...]}
//!   -> {"tokensUsed", "tokenBudget", "sourceCount", "sourcesIncluded", "factsKept",
//!       "factsFound", "summary", "includedSourceIds"}
//! ```
//!
//! The budget is taken as given (no clamping to the advertised maximum: that is the dream's
//! job). A failed run prints `{"error": "<code>", "message": "..."}` and exits with status 2;
//! unreadable input exits with status 1. Messages carry counts only, never entry text.
//!
//! ```text
//! cargo run -q --release -p distill --example distill_corpus < doc.json
//! ```

use std::io::Read;
use std::process::ExitCode;

use distill::{DeterministicDistiller, DistillInput, Distiller, SourceEntry};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    budget: u32,
    sources: Vec<Source>,
}

/// Extra fields (the quality corpus carries `subject`) are ignored: the distiller does not use
/// them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Source {
    id: String,
    content: String,
    #[serde(default)]
    tags: Vec<String>,
    created_at_ms: i64,
}

fn main() -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("distill_corpus: cannot read standard input: {e}");
        return ExitCode::from(1);
    }
    let doc: Doc = match serde_json::from_str(&text) {
        Ok(doc) => doc,
        Err(e) => {
            // serde_json's message names the position and the expected shape, not the content.
            eprintln!("distill_corpus: not a {{\"budget\", \"sources\"}} document: {e}");
            return ExitCode::from(1);
        }
    };
    let input = DistillInput {
        sources: doc
            .sources
            .into_iter()
            .map(|s| SourceEntry {
                id: s.id,
                content: s.content,
                tags: s.tags,
                created_at_ms: s.created_at_ms,
            })
            .collect(),
        token_budget: doc.budget,
    };
    match DeterministicDistiller.distill(&input) {
        Ok(d) => {
            println!(
                "{}",
                json!({
                    "tokensUsed": d.tokens_used,
                    "tokenBudget": d.token_budget,
                    "sourceCount": input.sources.len(),
                    "sourcesIncluded": d.included_source_ids.len(),
                    "factsKept": d.facts_kept,
                    "factsFound": d.facts_found,
                    "summary": d.summary,
                    "includedSourceIds": d.included_source_ids,
                })
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{}", json!({"error": e.code(), "message": e.to_string()}));
            ExitCode::from(2)
        }
    }
}
