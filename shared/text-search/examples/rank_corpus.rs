//! Ranks a labelled corpus with this crate's engine for the retrieval benchmark
//! (`tests/retrieval/bench.py`, docs/figures.md "Retrieval quality"): one JSON document on stdin
//! (`{"limit", "stem", "entries": [{"id", "content", "tags", "createdAt", "embedding"?}],
//! "queries": [{"id", "q", "tags", "embedding"?}]}`), one on stdout (`{"text": {query id: [entry
//! ids best first]}, "semantic": …, "hybrid": …}`; the last two only when embeddings came in).
//! `createdAt` is the entry's time in milliseconds since the epoch (what `Document::created_ms`
//! holds in the search route: the stored entry's createdAt).
//! Each query sees the entries carrying all its tags, and an entry's searchable text is its
//! content and its tags, ranked by `text_search::search`, the function the search route runs.

use std::collections::BTreeMap;
use std::io::Read;

use serde::Deserialize;
use text_search::{search, searchable_text, Analyzer, Document, Ranking, TermCache};

#[derive(Deserialize)]
struct Input {
    limit: usize,
    #[serde(default = "yes")]
    stem: bool,
    entries: Vec<Item>,
    queries: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    id: String,
    #[serde(alias = "q")]
    content: String,
    #[serde(default)]
    tags: Vec<String>,
    embedding: Option<Vec<f32>>,
    #[serde(rename = "createdAt", default)]
    created_ms: i64,
}

fn yes() -> bool {
    true
}

type Rankings = BTreeMap<String, Vec<String>>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut raw = String::new();
    std::io::stdin().read_to_string(&mut raw)?;
    let input: Input = serde_json::from_str(&raw)?;
    let analyzer = Analyzer::new(input.stem);
    let cache = TermCache::default();
    let with_vectors = input.queries.iter().all(|q| q.embedding.is_some());
    let (mut text, mut semantic, mut hybrid) = (Rankings::new(), Rankings::new(), Rankings::new());
    for q in &input.queries {
        let candidates: Vec<&Item> = input
            .entries
            .iter()
            .filter(|e| q.tags.iter().all(|t| e.tags.contains(t)))
            .collect();
        let texts: Vec<String> = candidates
            .iter()
            .map(|e| searchable_text(&e.content, &e.tags))
            .collect();
        let documents: Vec<Document<'_>> = candidates
            .iter()
            .zip(&texts)
            .map(|(e, text)| Document {
                id: &e.id,
                text,
                created_ms: e.created_ms,
            })
            .collect();
        let vectors: Vec<Option<&[f32]>> =
            candidates.iter().map(|e| e.embedding.as_deref()).collect();
        let ranked = |ranking: Ranking<'_>| -> Vec<String> {
            let hits = search(
                &analyzer,
                &cache,
                &documents,
                &vectors,
                &q.content,
                ranking,
                input.limit,
            );
            hits.iter()
                .map(|h| candidates[h.index].id.clone())
                .collect()
        };
        text.insert(q.id.clone(), ranked(Ranking::Text));
        if let (true, Some(query)) = (with_vectors, &q.embedding) {
            semantic.insert(q.id.clone(), ranked(Ranking::Semantic(query)));
            hybrid.insert(q.id.clone(), ranked(Ranking::Hybrid(query)));
        }
    }
    let mut out = serde_json::Map::new();
    out.insert("text".into(), serde_json::to_value(text)?);
    if with_vectors {
        out.insert("semantic".into(), serde_json::to_value(semantic)?);
        out.insert("hybrid".into(), serde_json::to_value(hybrid)?);
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
