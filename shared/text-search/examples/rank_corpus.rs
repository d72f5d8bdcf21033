//! Ranks a labelled corpus with this crate's engine for the retrieval benchmark
//! (`tests/retrieval/bench.py`, README "Search"): one JSON document on stdin
//! (`{"limit", "stem", "entries": [{"id", "content", "tags", "embedding"?}],
//! "queries": [{"id", "q", "tags", "embedding"?}]}`), one on stdout (`{"text": {query id: [entry
//! ids best first]}, "semantic": …, "hybrid": …}`; the last two only when embeddings came in).
//! Each query sees the entries carrying all its tags, and an entry's searchable text is its
//! content and its tags, and text and semantic rankings get the recency prior, exactly as the
//! search route does.

use std::collections::BTreeMap;
use std::io::Read;

use serde::Deserialize;
use text_search::recency::prefer_recent;
use text_search::similarity::{fuse, nearest};
use text_search::{rank, Analyzer, Document, Hit};

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
            .map(|e| {
                std::iter::once(e.content.as_str())
                    .chain(e.tags.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect();
        let ids: Vec<&str> = candidates.iter().map(|e| e.id.as_str()).collect();
        let documents: Vec<Document<'_>> = ids
            .iter()
            .zip(&texts)
            .map(|(id, text)| Document { id, text })
            .collect();
        let named = |hits: &[Hit]| -> Vec<String> {
            hits.iter().map(|h| ids[h.index].to_owned()).collect()
        };
        let mut by_text = rank(&analyzer, &documents, &q.content, documents.len());
        prefer_recent(&mut by_text, &ids);
        text.insert(
            q.id.clone(),
            named(&by_text[..by_text.len().min(input.limit)]),
        );
        if let (true, Some(query)) = (with_vectors, &q.embedding) {
            let vectors: Vec<Option<&[f32]>> =
                candidates.iter().map(|e| e.embedding.as_deref()).collect();
            let mut by_vector = nearest(&ids, &vectors, query, ids.len());
            prefer_recent(&mut by_vector, &ids);
            semantic.insert(
                q.id.clone(),
                named(&by_vector[..by_vector.len().min(input.limit)]),
            );
            hybrid.insert(
                q.id.clone(),
                named(&fuse(&ids, &[&by_text, &by_vector], input.limit)),
            );
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
