//! Which entries belong together: cohorts, exact and near-duplicate clustering and fact
//! slots (openwop-agent-memory.md §"Background consolidation (RFC 0068)": "merge duplicates,
//! supersede stale facts").
//!
//! 1. Entries whose id occurs more than once in the input are left alone (the store guarantees
//!    unique ids; if that is ever violated, consolidating could delete the wrong twin).
//! 2. The rest are split into cohorts by `(subject, set of fact keys)`. Nothing ever crosses a
//!    cohort: entries of different subjects stay apart so forget-by-subject still finds every
//!    derived entry by its subject, and entries of different fact slots (or a slot entry and a
//!    slot-less one) are different facts whatever their wording.
//! 3. A cohort with fact keys is one slot: all of its entries form one supersede group.
//! 4. A cohort without fact keys is clustered: entries with equal normalised text are exact
//!    duplicates; distinct normalised texts are joined when they are near duplicates (guard plus
//!    Jaccard, see [`crate::normalise`]). Candidate pairs come from LSH buckets keyed by
//!    `(guard fingerprint, band, band hash)`, verified pairs are joined with union-find, and each
//!    connected component of two or more entries is one duplicate group. (A guard class of more
//!    than [`MAX_NEAR_DUPLICATE_CLASS`] distinct texts only folds exact duplicates.)
//!
//! Everything is processed in id order and hash maps are only used for lookups (never
//! iterated into the output), so the groups do not depend on the input order.
//!
//! # Memory access
//!
//! A pass reads every entry once, in input order (the order a store read put them in memory):
//! cohort, id and text analysis all come from that one sweep and are kept as a small
//! fixed-size record per entry. Texts are compared by the SHA-256 digests of their normalised
//! forms (two different texts with one digest would be a SHA-256 collision): exact duplicates
//! are found, and supersession tells agreeing versions from stale ones, without reading any
//! text a second time. Only near-duplicate candidates (texts sharing a guard fingerprint) are
//! normalised again, visited in input order, and merging reads a text again only to copy the
//! survivor's. Jumping between the texts of a large corpus in id or hash order costs a cache
//! miss per visit once the corpus outgrows the cache, which makes a pass over 100,000 entries
//! cost more per entry than one over 10,000.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use sha2::{Digest, Sha256};

use crate::link::fact_check::FactCheck;
use crate::link::supersession;
use crate::link::supersession::Supersession;
use crate::link::LinkRule;
use crate::merge::display_len;
use crate::minhash::{band_key, signature, Signature, BANDS};
use crate::normalise::{
    analyse_with, content_words, jaccard, near_in_class, normalise, same_content_words, shingles,
};
use crate::semantic::{self, Semantic};
use crate::substitution::{self, Longest, MAX_SUBSTITUTION_RUN};
use crate::tags::fact_keys;
use crate::{Entry, MergeKind};

/// A set of input entries to be folded into one surviving entry.
#[derive(Debug)]
pub(crate) struct Group {
    pub kind: MergeKind,
    /// Indices into the input slice, in ascending id order; at least two.
    pub members: Vec<usize>,
    /// What merging needs of each member's text (parallel to `members`), measured in the
    /// sweep, so merging never reads a text again except to copy the survivor's.
    pub texts: Vec<MemberText>,
}

/// A member's text as merging sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemberText {
    /// SHA-256 of the normalised text: equal digests are equal normalised texts.
    pub digest: Digest256,
    /// [`display_len`] of the raw text (the longest duplicate text survives).
    pub display_len: usize,
}

impl MemberText {
    pub(crate) fn of(content: &str) -> MemberText {
        analyse(content, &mut String::new()).0
    }
}

/// Reads one entry's text: what merging needs, and the guard fingerprint. `norm` is a scratch
/// buffer, so one allocation serves a whole sweep.
fn analyse(content: &str, norm: &mut String) -> (MemberText, u64) {
    analyse_scanning(
        content,
        norm,
        &mut supersession::Scanner::default(),
        &mut Longest::default(),
    )
}

fn analyse_scanning(
    content: &str,
    norm: &mut String,
    scanner: &mut supersession::Scanner,
    longest: &mut Longest,
) -> (MemberText, u64) {
    let guard = analyse_with(content, norm, scanner, longest);
    let text = MemberText {
        digest: Digest256(Sha256::digest(norm.as_bytes()).into()),
        display_len: display_len(content),
    };
    (text, guard)
}

/// A SHA-256 digest as a hash-map key; its first eight bytes are already uniformly spread, so
/// they are the whole hash.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Digest256([u8; 32]);

/// A digest of a short text can be reversed by guessing, so it is never printed.
impl std::fmt::Debug for Digest256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Digest256(..)")
    }
}

impl Hash for Digest256 {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(head));
    }
}

/// Finds every group of the corpus, ordered by the smallest id of each group.
pub(crate) fn find_groups(
    entries: &[Entry],
    threshold: f64,
    semantic: Option<&Semantic<'_>>,
) -> Vec<Group> {
    // The one sweep over the input (see the module documentation). The cohort numbering
    // follows the input order, but it never reaches the output: members are listed in id order
    // and groups are sorted by the rank of their first member at the end.
    let mut cohort_of: HashMap<(Option<&str>, Vec<&str>), usize> = HashMap::new();
    let mut slotless: Vec<bool> = Vec::new();
    let mut keyed: Vec<(u128, usize, usize)> = Vec::with_capacity(entries.len());
    let mut texts: Vec<MemberText> = Vec::with_capacity(entries.len());
    let mut guards: Vec<u64> = Vec::with_capacity(entries.len());
    let mut plain: Vec<Plain> = Vec::with_capacity(entries.len());
    // Substitution keys of slot-less entries: the high half of the key above the entry index,
    // one u64 each (sorted as plain integers). Half a key is enough to find candidates; every
    // candidate pair is verified on its texts.
    let mut substitution_keys: Vec<u64> =
        Vec::with_capacity(entries.len().saturating_mul(substitution::KEYED_WORDS + 1));
    let mut norm = String::new();
    // The cohort of entries with neither a subject nor a fact key, usually most of them,
    // is kept outside the map, so they are not hashed.
    let mut plain_cohort: Option<usize> = None;
    for (i, e) in entries.iter().enumerate() {
        let keys = fact_keys(&e.tags);
        let next = slotless.len();
        let is_slotless = keys.is_empty();
        let new_cohort = || {
            slotless.push(is_slotless);
            next
        };
        let p = if is_slotless && e.subject.is_none() {
            *plain_cohort.get_or_insert_with(new_cohort)
        } else {
            *cohort_of
                .entry((e.subject.as_deref(), keys))
                .or_insert_with(new_cohort)
        };
        keyed.push((id_prefix(&e.id), i, p));
        let mut scanner = supersession::Scanner::default();
        let mut longest = Longest::default();
        let (text, guard) = analyse_scanning(&e.content, &mut norm, &mut scanner, &mut longest);
        if is_slotless {
            if let Ok(index) = u32::try_from(i) {
                substitution_keys.extend(
                    longest
                        .keys(guard)
                        .map(|k| (k & 0xffff_ffff_0000_0000) | u64::from(index)),
                );
            }
        }
        texts.push(text);
        guards.push(guard);
        let (update, lead) = scanner.finish();
        plain.push(Plain::new(update, lead));
    }
    drop(cohort_of);
    drop(norm);
    let substitution_pairs = substitution_candidates(substitution_keys, &guards);
    // Node of each entry within its cohort, written by `components` (only candidate pairs
    // read it, so entries of other cohorts are never confused: pairs are per cohort).
    let mut node_of_entry: Vec<usize> = if substitution_pairs.is_empty() {
        Vec::new()
    } else {
        vec![NONE; entries.len()]
    };

    // Id order. Comparing a 16-byte zero-padded prefix as an integer first is exactly
    // lexicographic order (ties fall back to the full comparison) and spares most comparisons
    // a trip to the id's heap allocation.
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| entries[a.1].id.cmp(&entries[b.1].id))
            .then(a.1.cmp(&b.1))
    });
    let mut rank = vec![0usize; entries.len()];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); slotless.len()];
    for run in keyed.chunk_by(|a, b| a.0 == b.0 && entries[a.1].id == entries[b.1].id) {
        // An id that occurs more than once is left alone entirely.
        if let [(_, i, p)] = run {
            members[*p].push(*i);
        }
    }
    // Candidate pairs by cohort (a pair across cohorts is never linked).
    let mut substitution_pairs: Vec<(usize, usize, usize)> = if substitution_pairs.is_empty() {
        Vec::new()
    } else {
        let mut cohort_of_entry = vec![NONE; entries.len()];
        for &(_, i, p) in &keyed {
            cohort_of_entry[i] = p;
        }
        substitution_pairs
            .into_iter()
            .filter(|&(a, b)| cohort_of_entry[a] == cohort_of_entry[b])
            .map(|(a, b)| (cohort_of_entry[a], a, b))
            .collect()
    };
    substitution_pairs.sort_unstable();
    for (r, (_, i, _)) in keyed.iter().enumerate() {
        rank[*i] = r;
    }
    drop(keyed);

    let mut groups = Vec::new();
    for (p, members) in members.into_iter().enumerate() {
        if members.len() < 2 {
            continue;
        }
        if slotless[p] {
            let found = Analysed {
                texts: &texts,
                guards: &guards,
                plain: &plain,
            };
            groups.extend(
                components(
                    entries,
                    &found,
                    &members,
                    threshold,
                    Substitutions {
                        pairs: cohort_slice(&substitution_pairs, p),
                        node_of_entry: &mut node_of_entry,
                    },
                    semantic,
                )
                .into_iter()
                .map(|(kind, members, texts)| Group {
                    kind,
                    members,
                    texts,
                }),
            );
        } else {
            groups.push(Group {
                kind: MergeKind::Supersede,
                texts: members.iter().map(|&m| texts[m]).collect(),
                members,
            });
        }
    }
    groups.sort_unstable_by_key(|g| rank[g.members[0]]);
    groups
}

fn id_prefix(id: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let n = id.len().min(16);
    bytes[..n].copy_from_slice(&id.as_bytes()[..n]);
    u128::from_be_bytes(bytes)
}

/// What the sweep learnt of each entry's text for plain-language supersession. One per entry
/// of a pass, so 16 bytes rather than the 24 of an `Option<u64>` beside a `bool`.
#[derive(Clone, Copy)]
struct Plain {
    /// Fingerprint of its lead word, the key older statements are found by (if `has_lead`).
    lead: u64,
    has_lead: bool,
    /// Whether the text holds update language (`supersession::Scanner::finish`).
    update: bool,
}

impl Plain {
    fn new(update: bool, lead: Option<u64>) -> Plain {
        Plain {
            lead: lead.unwrap_or_default(),
            has_lead: lead.is_some(),
            update,
        }
    }

    fn lead(&self) -> Option<u64> {
        self.has_lead.then_some(self.lead)
    }
}

/// The sweep's per-entry results, indexed like the input.
struct Analysed<'a> {
    texts: &'a [MemberText],
    guards: &'a [u64],
    plain: &'a [Plain],
}

/// Largest number of distinct content-word sequences under one lead word that supersession
/// searches (an update is compared with each): a bound on a pass's work. Counted in guard
/// classes, which duplicate folding never changes, so a lead over the limit stays over it on
/// the next pass and the pass stays idempotent.
pub(crate) const MAX_SUPERSESSION_LEAD: usize = 512;

/// The groups of one slot-less cohort (`members` in id order): connected components of the
/// duplicate relation and of plain-language supersession; a component with a supersession in
/// it is a supersede group.
///
/// A node is one distinct normalised text, numbered in the id order of its first member. Only
/// nodes that share a guard fingerprint with another node are normalised again, once each and
/// in input order; their normalised texts are the only text a pass holds besides the input,
/// each dropped once its guard bucket has been searched.
fn components(
    entries: &[Entry],
    found: &Analysed<'_>,
    members: &[usize],
    threshold: f64,
    substitutions: Substitutions<'_>,
    semantic: Option<&Semantic<'_>>,
) -> Vec<(MergeKind, Vec<usize>, Vec<MemberText>)> {
    let (texts, guards) = (found.texts, found.guards);
    // Exact duplicates: one node per distinct digest.
    let mut node_by_digest: HashMap<Digest256, usize, BuildHasherDefault<PassThrough>> =
        HashMap::with_capacity_and_hasher(members.len(), BuildHasherDefault::default());
    let mut first_member: Vec<usize> = Vec::new();
    let mut node_of: Vec<usize> = Vec::with_capacity(members.len());
    for &m in members {
        let node = *node_by_digest.entry(texts[m].digest).or_insert_with(|| {
            first_member.push(m);
            first_member.len() - 1
        });
        node_of.push(node);
    }
    drop(node_by_digest);

    // Near duplicates: only nodes sharing a guard fingerprint can ever be joined.
    let nodes = first_member.len();
    let mut uf = UnionFind::new(nodes);
    let mut by_guard: Vec<(u64, usize)> = first_member
        .iter()
        .enumerate()
        .map(|(node, &m)| (guards[m], node))
        .collect();
    by_guard.sort_unstable();
    let mut candidates: Vec<(u64, usize)> = by_guard
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|run| run.len() >= 2)
        .flatten()
        .copied()
        .collect();
    drop(by_guard);
    // The candidates' normalised texts, computed in input order, then bucketed by guard (in
    // node order within a bucket). Only candidates get a slot: this is the peak of a pass.
    candidates.sort_unstable_by_key(|&(_, node)| first_member[node]);
    let mut normalised: Vec<(u64, usize, String)> = candidates
        .into_iter()
        .map(|(guard, node)| {
            let norm = normalise(&entries[first_member[node]].content);
            (guard, node, norm)
        })
        .collect();
    normalised.sort_unstable_by_key(|&(guard, node, _)| (guard, node));
    let mut normalised = normalised.into_iter().peekable();
    while let Some((guard, node, norm)) = normalised.next() {
        let mut bucket: Vec<(usize, String)> = vec![(node, norm)];
        while let Some((_, node, norm)) = normalised.next_if(|next| next.0 == guard) {
            bucket.push((node, norm));
        }
        for class in guard_classes(&bucket) {
            if (2..=MAX_NEAR_DUPLICATE_CLASS).contains(&class.len()) {
                link_near_duplicates(&class, threshold, &mut uf);
            }
        }
    }

    link_substitutions(
        entries,
        members,
        &node_of,
        substitutions,
        threshold,
        &mut uf,
    );
    if let Some(semantic) = semantic {
        link_semantic(entries, members, &node_of, semantic, &mut uf);
    }
    let superseding = link_supersessions(entries, found, members, &node_of, &first_member, &mut uf);

    // Components of two or more entries, in the id order of their first member; singletons
    // (the vast majority) never get a vector.
    let mut size_of_root = vec![0usize; nodes];
    for &node in &node_of {
        size_of_root[uf.find(node)] += 1;
    }
    let mut superseded_root = vec![false; nodes];
    for node in superseding {
        superseded_root[uf.find(node)] = true;
    }
    let mut slot_of_root = vec![NONE; nodes];
    let mut components: Vec<(MergeKind, Vec<usize>, Vec<MemberText>)> = Vec::new();
    for (local, &node) in node_of.iter().enumerate() {
        let root = uf.find(node);
        if size_of_root[root] < 2 {
            continue;
        }
        if slot_of_root[root] == NONE {
            slot_of_root[root] = components.len();
            let size = size_of_root[root];
            let kind = if superseded_root[root] {
                MergeKind::Supersede
            } else {
                MergeKind::Duplicate
            };
            components.push((kind, Vec::with_capacity(size), Vec::with_capacity(size)));
        }
        let (_, ms, member_texts) = &mut components[slot_of_root[root]];
        ms.push(members[local]);
        member_texts.push(texts[members[local]]);
    }
    components
}

/// Joins each text with update language to the older statements it supersedes
/// (`supersession`); returns the nodes of every link. Nodes are distinct normalised texts; a
/// node is newer than another when its newest member is newer than the other's oldest.
fn link_supersessions(
    entries: &[Entry],
    found: &Analysed<'_>,
    members: &[usize],
    node_of: &[usize],
    first_member: &[usize],
    uf: &mut UnionFind,
) -> Vec<usize> {
    let nodes = first_member.len();
    let updates: Vec<usize> = (0..nodes)
        .filter(|&n| found.plain[first_member[n]].update)
        .collect();
    if updates.is_empty() {
        return Vec::new();
    }
    let age = |m: usize| (entries[m].created_at_ms, entries[m].id.as_str());
    let mut oldest: Vec<(i64, &str)> = vec![(i64::MAX, ""); nodes];
    let mut newest: Vec<(i64, &str)> = vec![(i64::MIN, ""); nodes];
    for (local, &node) in node_of.iter().enumerate() {
        let a = age(members[local]);
        oldest[node] = oldest[node].min(a);
        newest[node] = newest[node].max(a);
    }
    // Older statements by lead word, in node order; a lead with too many distinct
    // content-word sequences is not searched (see MAX_SUPERSESSION_LEAD).
    let mut by_lead: HashMap<u64, Vec<usize>> = HashMap::new();
    for (node, &first) in first_member.iter().enumerate() {
        if let Some(lead) = found.plain[first].lead() {
            by_lead.entry(lead).or_default().push(node);
        }
    }
    by_lead.retain(|_, list| {
        let mut classes: Vec<u64> = list
            .iter()
            .map(|&n| found.guards[first_member[n]])
            .collect();
        classes.sort_unstable();
        classes.dedup();
        classes.len() <= MAX_SUPERSESSION_LEAD
    });
    let mut norms: HashMap<usize, String> = HashMap::new();
    let mut linked = Vec::new();
    for u in updates {
        let u_norm = normalise(&entries[first_member[u]].content);
        let u_words: Vec<&str> = content_words(&u_norm).collect();
        for lead in supersession::leads_of(&u_words) {
            let Some(candidates) = by_lead.get(&lead) else {
                continue;
            };
            for &o in candidates {
                if o == u || newest[u] <= oldest[o] {
                    continue;
                }
                let o_norm = norms
                    .entry(o)
                    .or_insert_with(|| normalise(&entries[first_member[o]].content));
                let (o_raw, u_raw) = (
                    entries[first_member[o]].content.as_str(),
                    entries[first_member[u]].content.as_str(),
                );
                if Supersession::links_normalised(o_raw, o_norm, u_raw, &u_norm) {
                    uf.union(o, u);
                    linked.extend([o, u]);
                }
            }
        }
    }
    linked
}

const NONE: usize = usize::MAX;

/// Candidate pairs for substitution links: entries sharing a key (different texts, different
/// content words), sorted. Runs longer than [`MAX_SUBSTITUTION_RUN`] are not searched.
fn substitution_candidates(mut keys: Vec<u64>, guards: &[u64]) -> Vec<(usize, usize)> {
    keys.sort_unstable();
    keys.dedup();
    let entry = |k: u64| (k & 0xffff_ffff) as usize;
    let mut pairs = Vec::new();
    for run in keys.chunk_by(|a, b| a >> 32 == b >> 32) {
        if !(2..=MAX_SUBSTITUTION_RUN).contains(&run.len()) {
            continue;
        }
        for (x, &a) in run.iter().enumerate() {
            for &b in &run[x + 1..] {
                let (a, b) = (entry(a), entry(b));
                // Equal guards: the same content words, which near-duplicate folding decides.
                // (Equal texts have equal guards, so their digests need no comparison.)
                if guards[a] != guards[b] {
                    pairs.push((a.min(b), a.max(b)));
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// What one cohort's substitution search needs from the sweep.
pub(crate) struct Substitutions<'a> {
    /// The cohort's candidate pairs `(cohort, a, b)`, sorted.
    pairs: &'a [(usize, usize, usize)],
    /// Scratch indexed by entry: the node of each member of the current cohort.
    node_of_entry: &'a mut [usize],
}

fn cohort_slice(pairs: &[(usize, usize, usize)], p: usize) -> &[(usize, usize, usize)] {
    let start = pairs.partition_point(|&(q, _, _)| q < p);
    let end = pairs.partition_point(|&(q, _, _)| q <= p);
    &pairs[start..end]
}

/// Joins the nodes of one cohort whose embeddings propose them as duplicates and whose
/// facts agree ([`fact_check::facts_agree`]).
fn link_semantic(
    entries: &[Entry],
    members: &[usize],
    node_of: &[usize],
    semantic: &Semantic<'_>,
    uf: &mut UnionFind,
) {
    let proposals = semantic::proposals(members, semantic);
    if proposals.is_empty() {
        return;
    }
    let node_of_entry: HashMap<usize, usize> = members
        .iter()
        .zip(node_of)
        .map(|(&m, &node)| (m, node))
        .collect();
    link_pairs(
        entries,
        proposals,
        |e| node_of_entry.get(&e).copied(),
        uf,
        FactCheck::links_normalised,
    );
}

/// Joins the candidate pairs (entry indices) whose texts pass `linked(a raw, a normalised,
/// b raw, b normalised)`; `node` maps an entry to its node (`None`: left alone). Each text is
/// normalised at most once.
fn link_pairs(
    entries: &[Entry],
    pairs: impl IntoIterator<Item = (usize, usize)>,
    node: impl Fn(usize) -> Option<usize>,
    uf: &mut UnionFind,
    linked: impl Fn(&str, &str, &str, &str) -> bool,
) {
    let mut norms: HashMap<usize, String> = HashMap::new();
    for (a, b) in pairs {
        let (Some(na), Some(nb)) = (node(a), node(b)) else {
            continue;
        };
        if uf.find(na) == uf.find(nb) {
            continue;
        }
        for e in [a, b] {
            norms
                .entry(e)
                .or_insert_with(|| normalise(&entries[e].content));
        }
        let (Some(a_norm), Some(b_norm)) = (norms.get(&a), norms.get(&b)) else {
            continue;
        };
        if linked(&entries[a].content, a_norm, &entries[b].content, b_norm) {
            uf.union(na, nb);
        }
    }
}

/// Joins the nodes of one cohort whose texts differ by typos or one synonym
/// ([`substitution::linked`]); candidates come from [`substitution_candidates`].
fn link_substitutions(
    entries: &[Entry],
    members: &[usize],
    node_of: &[usize],
    s: Substitutions<'_>,
    threshold: f64,
    uf: &mut UnionFind,
) {
    if s.pairs.is_empty() {
        return;
    }
    for (&m, &node) in members.iter().zip(node_of) {
        s.node_of_entry[m] = node;
    }
    let table: &[usize] = s.node_of_entry;
    link_pairs(
        entries,
        s.pairs.iter().map(|&(_, a, b)| (a, b)),
        |e| Some(table[e]).filter(|&n| n != NONE),
        uf,
        |a_raw, a, b_raw, b| substitution::linked(a_raw, a, b_raw, b, threshold),
    );
    for &m in members {
        s.node_of_entry[m] = NONE;
    }
}

/// Largest guard class (distinct phrasings of one content-word sequence) searched for near
/// duplicates. Candidate pairs within a class can in the worst case be all pairs, so a larger
/// class (only conceivable as hostile input) is left to exact-duplicate folding. This keeps a
/// pass bounded without hurting idempotency: folding exact duplicates never changes how many
/// distinct texts a class has, so a class over the limit stays over it on the next pass.
pub(crate) const MAX_NEAR_DUPLICATE_CLASS: usize = 512;

/// Hasher for keys that already are well-mixed 64-bit fingerprints.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Splits a fingerprint bucket of `(node, normalised text)` into classes of truly equal
/// content-word sequences (the fingerprint is a hash; a collision must not join different facts).
fn guard_classes(bucket: &[(usize, String)]) -> Vec<Vec<&(usize, String)>> {
    let mut classes: Vec<Vec<&(usize, String)>> = Vec::new();
    for item in bucket {
        match classes
            .iter_mut()
            .find(|c| same_content_words(&c[0].1, &item.1))
        {
            Some(class) => class.push(item),
            None => classes.push(vec![item]),
        }
    }
    classes
}

/// Largest guard class whose pairs are all compared, reorderings included; a larger class (a
/// sentence with very many distinct phrasings) is searched with LSH over word shingles, which
/// finds same-order near duplicates only.
const ALL_PAIRS_CLASS: usize = 32;

/// Joins the near-duplicate pairs of one guard class: every pair of a small class, LSH
/// candidates with an exact Jaccard check in a large one.
fn link_near_duplicates(class: &[&(usize, String)], threshold: f64, uf: &mut UnionFind) {
    if class.len() <= ALL_PAIRS_CLASS {
        for (x, (a, a_norm)) in class.iter().map(|c| (c.0, &c.1)).enumerate() {
            for (b, b_norm) in class[x + 1..].iter().map(|c| (c.0, &c.1)) {
                if uf.find(a) != uf.find(b) && near_in_class(a_norm, b_norm, threshold) {
                    uf.union(a, b);
                }
            }
        }
        return;
    }
    let sets: Vec<Vec<u64>> = class.iter().map(|(_, norm)| shingles(norm)).collect();
    let sigs: Vec<Signature> = sets.iter().map(|s| signature(s)).collect();
    let mut keyed: Vec<(u64, usize)> = Vec::with_capacity(class.len());
    for band in 0..BANDS {
        keyed.clear();
        keyed.extend(sigs.iter().enumerate().map(|(i, s)| (band_key(s, band), i)));
        keyed.sort_unstable();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            for (x, &(_, i)) in run.iter().enumerate() {
                for &(_, j) in &run[x + 1..] {
                    let (a, b) = (class[i].0, class[j].0);
                    if uf.find(a) != uf.find(b)
                        && content_words(&class[i].1).eq(content_words(&class[j].1))
                        && jaccard(&sets[i], &sets[j]) >= threshold
                    {
                        uf.union(a, b);
                    }
                }
            }
        }
    }
}

/// Disjoint sets with path halving; the root is always the smallest index of its set, so the
/// result is independent of the order unions happen in.
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            let grand = self.parent[self.parent[x]];
            self.parent[x] = grand;
            x = grand;
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[hi] = lo;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_compare_by_normalised_form_and_never_print_their_digest() {
        let a = MemberText::of("The user prefers EMAIL.");
        let b = MemberText::of("  the user   prefers email ");
        let c = MemberText::of("The user prefers phone.");
        assert_eq!(a.digest, b.digest);
        assert_ne!(a.digest, c.digest);
        assert_eq!(a.display_len, "The user prefers EMAIL.".len());
        let shown = format!("{a:?}");
        assert!(shown.contains("Digest256(..)"), "{shown}");
        assert!(!shown.to_lowercase().contains("email"), "{shown}");
        let hex: String = a.digest.0[..4].iter().map(|b| format!("{b:02x}")).collect();
        assert!(!shown.contains(&hex), "{shown}");
    }
}
