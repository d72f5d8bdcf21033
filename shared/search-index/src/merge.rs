//! Merging segments (docs/search.md "The index"): a pass folds the tail and small segments into
//! one, and the rewrite after a forget builds the segments without the forgotten entries, so that
//! no object holds their terms or vectors any more. A merge keeps exactly the documents it is told
//! to keep, with the same lengths, frequencies, tags and vectors, so queries rank the same before
//! and after it.

use std::collections::BTreeMap;

use text_search::Analyzer;

use crate::ivf::Ann;
use crate::segment::{DocMeta, IndexedDoc, Segment};

/// The documents of `segments` that `keep` admits (given the segment's position and the
/// document), as segment input again (term counts as repeats: only counts and lengths matter to
/// ranking), plus `extra` (the tail being folded in), built into one segment whose approximate
/// index is as `ann` says. A later segment's copy of an id wins over an earlier one's, and
/// `extra` over both. The lists and their centroids are trained again on the kept vectors only,
/// so a forgotten entry's vector leaves no trace in them either. The segments must have every
/// vector loaded (decoded whole).
pub fn merge(
    segments: &[&Segment],
    keep: impl Fn(usize, &DocMeta) -> bool,
    extra: Vec<IndexedDoc>,
    vector_model: &str,
    analyzer: &Analyzer,
    ann: &Ann,
) -> Segment {
    debug_assert!(segments.iter().all(|s| s.vectors_complete()));
    let mut docs: BTreeMap<String, IndexedDoc> = BTreeMap::new();
    for (si, segment) in segments.iter().enumerate() {
        let mut terms: Vec<Vec<String>> = vec![Vec::new(); segment.docs().len()];
        for (term, postings) in segment.all_postings() {
            for p in postings {
                for _ in 0..p.tf {
                    terms[p.doc as usize].push(term.to_owned());
                }
            }
        }
        let mut tags: Vec<Vec<String>> = vec![Vec::new(); segment.docs().len()];
        for (tag, list) in segment.all_tags() {
            for &doc in list {
                tags[doc as usize].push(tag.to_owned());
            }
        }
        for (position, (meta, (terms, tags))) in segment
            .docs()
            .iter()
            .zip(terms.into_iter().zip(tags))
            .enumerate()
        {
            if !keep(si, meta) {
                docs.remove(&*meta.id);
                continue;
            }
            let vector = (segment.vector_model() == vector_model)
                .then(|| segment.vector(position as u32).map(<[f32]>::to_vec))
                .flatten();
            docs.insert(
                meta.id.to_string(),
                IndexedDoc {
                    id: meta.id.to_string(),
                    created_at_ms: meta.created_at_ms,
                    expires_at_ms: meta.expires_at_ms,
                    tags,
                    terms,
                    length: meta.length,
                    vector,
                },
            );
        }
    }
    for doc in extra {
        docs.insert(doc.id.clone(), doc);
    }
    Segment::build_with(docs.into_values().collect(), vector_model, analyzer, ann)
}
