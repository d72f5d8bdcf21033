//! The archive against RFC 0062 run contract §4 (immutable, addressable, byte-stable for a given
//! source set + budget) and the archive's digest key, provenance and deterministic output id.

mod common;

use common::*;
use distill::archive::build_archive;
use distill::{
    archive_digest, output_entry_id, to_bytes, Archive, DeterministicDistiller, DistillError,
    DistillInput, Distiller, SourceEntry, ARCHIVE_FORMAT, DETERMINISTIC_VERSION, TOKENIZER_NAME,
};

fn sources() -> Vec<SourceEntry> {
    vec![
        entry("01A", "Customer prefers email", &["preference"], DAY0),
        entry(
            "01B",
            "customer prefers email.",
            &["preference"],
            DAY0 + DAY,
        ),
        entry(
            "01C",
            "Refund of [REDACTED:card-1] issued",
            &["billing"],
            DAY0 + 2 * DAY,
        ),
    ]
}

fn build(sources: Vec<SourceEntry>, budget: u32) -> (Archive, Vec<u8>) {
    let input = DistillInput {
        sources,
        token_budget: budget,
    };
    let (archive, _) = build_archive(TENANT, REF, &input, &DeterministicDistiller, str::to_owned)
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = to_bytes(&archive);
    (archive, bytes)
}

#[test]
fn same_sources_and_budget_give_identical_bytes_at_the_same_key() {
    let (a, bytes_a) = build(sources(), 100_000);
    let mut shuffled = sources();
    shuffled.reverse();
    let (b, bytes_b) = build(shuffled, 100_000);
    assert_eq!(bytes_a, bytes_b);
    assert_eq!(a.key(), b.key());

    let mut more = sources();
    more.push(entry("01D", "Moved to Lisbon", &[], DAY0 + 3 * DAY));
    let (c, _) = build(more, 100_000);
    assert_ne!(c.key(), a.key(), "one new entry, new key");
}

#[test]
fn archive_document_shape() {
    let (archive, bytes) = build(sources(), 100_000);
    let text = String::from_utf8(bytes.clone()).unwrap_or_default();
    assert!(text.ends_with("}\n") && !text[..text.len() - 1].contains('\n'));
    let expected_prefix = format!(
        "{{\"format\":\"{ARCHIVE_FORMAT}\",\"digest\":\"{}\",\"tenantId\":\"t-1\",\"memoryRef\":\"{REF}\",\
         \"distillerVersion\":\"{DETERMINISTIC_VERSION}\",\"tokenizer\":\"{TOKENIZER_NAME}\",\"tokenBudget\":100000,",
        archive.digest
    );
    assert!(text.starts_with(&expected_prefix), "{text}");
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let keys: Vec<&str> = value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut expected = vec![
        "format",
        "digest",
        "tenantId",
        "memoryRef",
        "distillerVersion",
        "tokenizer",
        "tokenBudget",
        "tokensUsed",
        "inputTokens",
        "outputTokens",
        "inputCount",
        "sourceCount",
        "sourcesIncluded",
        "sourceIds",
        "outputEntryId",
        "outputCreatedAt",
        "summary",
    ];
    let mut got = keys.clone();
    got.sort_unstable();
    expected.sort_unstable();
    assert_eq!(got, expected, "no run id, no run time, nothing else");
    assert_eq!(value["sourceIds"], serde_json::json!(["01A", "01B", "01C"]));
    assert_eq!(value["sourceCount"], 3);
    // "customer prefers email." quotes its newest statement (01B); 01A is its duplicate.
    assert_eq!(value["sourcesIncluded"], 2);
    assert_eq!(
        value["inputTokens"],
        distill::count("customer prefers email.")
            + distill::count("Refund of [REDACTED:card-1] issued")
    );
    assert_eq!(value["inputCount"], 3);
    assert_eq!(value["outputCreatedAt"], "2026-11-22T00:00:00.000Z");
    assert_eq!(
        value["summary"],
        "## billing\n- Refund of [REDACTED:card-1] issued (latest 2026-11-22)\n\
         ## preference\n- customer prefers email. (x2, latest 2026-11-21)\n"
    );
    assert_eq!(
        archive.key().as_deref(),
        Ok(format!("t-1/agents/a-1/archives/{}.json", archive.digest).as_str())
    );
    println!("{text}");
}

#[test]
fn bytes_round_trip() {
    let (archive, bytes) = build(sources(), 100_000);
    let back = Archive::from_bytes(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, archive);
    assert_eq!(to_bytes(&back), bytes);
}

#[test]
fn from_bytes_rejects_foreign_or_inconsistent_documents() {
    let (_, bytes) = build(sources(), 100_000);
    let text = String::from_utf8(bytes).unwrap_or_default();
    let variants = [
        text.replace(ARCHIVE_FORMAT, "wop-memory.archive/v3"),
        text.replace("\"sourcesIncluded\":2", "\"sourcesIncluded\":4"),
        text.replace(",\"sourcesIncluded\":2", ""),
        text.replace(ARCHIVE_FORMAT, "wop-memory.archive/v1"),
        text.replace("\"tenantId\":\"t-1\"", "\"tenantId\":\"t-2\""),
        text.replacen('{', "{\"runId\":\"r-1\",", 1),
        text.replace("\"sourceCount\":3", "\"sourceCount\":2"),
        text.replace("\"tokenBudget\":100000", "\"tokenBudget\":10"),
        text.replace(".000Z", "Z"),
        "not json".to_owned(),
    ];
    for variant in variants {
        assert!(
            matches!(
                Archive::from_bytes(variant.as_bytes()),
                Err(DistillError::MalformedArchive(_))
            ),
            "accepted {variant}"
        );
    }
}

#[test]
fn version_1_documents_still_read_back() {
    let (archive, bytes) = build(sources(), 100_000);
    let v1 = String::from_utf8(bytes)
        .unwrap_or_default()
        .replace(ARCHIVE_FORMAT, "wop-memory.archive/v1")
        .replace(",\"sourcesIncluded\":2", "");
    let back = Archive::from_bytes(v1.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.sources_included, 3, "v1: every listed source was used");
    assert_eq!(
        Archive {
            sources_included: 2,
            ..back
        },
        archive
    );
}

#[test]
fn every_source_is_listed_even_when_few_make_it_into_the_summary() {
    let mut s = sources();
    for i in 0..40 {
        s.push(entry(
            &format!("02{i:02}"),
            &format!("Parcel {i} left the Hamburg depot this morning"),
            &["shipping"],
            DAY0 + 3 * DAY + i64::from(i),
        ));
    }
    let (archive, bytes) = build(s.clone(), 128);
    let mut all: Vec<String> = s.iter().map(|e| e.id.clone()).collect();
    all.sort();
    assert_eq!(archive.source_ids, all);
    assert_eq!(archive.input_count, 43);
    assert_eq!(archive.source_count, 43);
    assert!(
        archive.sources_included > 0 && archive.sources_included < 10,
        "{}",
        archive.sources_included
    );
    assert!(archive.tokens_used <= 128);
    assert_eq!(Archive::from_bytes(&bytes), Ok(archive));
}

#[test]
fn digest_changes_with_every_input_that_shapes_the_output() {
    let base = archive_digest(&sources(), 100_000, DETERMINISTIC_VERSION);
    assert_eq!(base.len(), 64);
    let mut reordered = sources();
    reordered.rotate_left(1);
    reordered[0].tags.push("preference".to_owned()); // duplicate tag: same set
    assert_eq!(
        archive_digest(&reordered, 100_000, DETERMINISTIC_VERSION),
        base
    );

    let mut changed: Vec<(&str, Vec<SourceEntry>, u32, &str)> = Vec::new();
    let mut s = sources();
    s[1].content.push('!');
    changed.push(("content", s, 100_000, DETERMINISTIC_VERSION));
    let mut s = sources();
    s[1].id = "01X".to_owned();
    changed.push(("id", s, 100_000, DETERMINISTIC_VERSION));
    let mut s = sources();
    s[1].tags = vec!["other".to_owned()];
    changed.push(("tags", s, 100_000, DETERMINISTIC_VERSION));
    let mut s = sources();
    s[1].created_at_ms += 1;
    changed.push(("createdAt", s, 100_000, DETERMINISTIC_VERSION));
    let mut s = sources();
    s.push(entry("01D", "new", &[], DAY0));
    changed.push(("added", s, 100_000, DETERMINISTIC_VERSION));
    let mut s = sources();
    s.pop();
    changed.push(("removed", s, 100_000, DETERMINISTIC_VERSION));
    changed.push(("budget", sources(), 99_999, DETERMINISTIC_VERSION));
    // The previous version: its archives of the same snapshot live at other keys.
    changed.push(("version", sources(), 100_000, "wop-memory.deterministic/2"));
    for (what, s, budget, version) in changed {
        assert_ne!(archive_digest(&s, budget, version), base, "{what}");
    }
}

#[test]
fn length_prefixes_prevent_concatenation_collisions() {
    let a = vec![entry("ab", "c", &[], DAY0)];
    let b = vec![entry("a", "bc", &[], DAY0)];
    assert_ne!(
        archive_digest(&a, 1_024, DETERMINISTIC_VERSION),
        archive_digest(&b, 1_024, DETERMINISTIC_VERSION)
    );
    let a = vec![entry("x", "", &["ab"], DAY0)];
    let b = vec![entry("x", "", &["a", "b"], DAY0)];
    assert_ne!(
        archive_digest(&a, 1_024, DETERMINISTIC_VERSION),
        archive_digest(&b, 1_024, DETERMINISTIC_VERSION)
    );
    assert_ne!(
        archive_digest(&[], 1_024, "v1"),
        archive_digest(&[], 1_024, "v")
    );
}

#[test]
fn output_entry_id_is_deterministic_and_time_ordered() {
    let (archive, _) = build(sources(), 100_000);
    assert_eq!(
        archive.output_entry_id,
        output_entry_id(&archive.digest, DAY0 + 2 * DAY)
    );
    let later = output_entry_id(&archive.digest, DAY0 + 3 * DAY);
    assert!(later > archive.output_entry_id, "ULIDs sort by time");
    assert_eq!(archive.output_entry_id.len(), 26);
}

#[test]
fn tenant_and_ref_are_checked_before_distilling() {
    let input = DistillInput {
        sources: sources(),
        token_budget: 100_000,
    };
    let mut redactor_called = false;
    let result = build_archive("t-2", REF, &input, &DeterministicDistiller, |s| {
        redactor_called = true;
        s.to_owned()
    });
    assert_eq!(result.err(), Some(DistillError::TenantMismatch));
    assert!(!redactor_called);
    let result = build_archive(
        TENANT,
        "workspaces/t-1/agents/../memories",
        &input,
        &DeterministicDistiller,
        str::to_owned,
    );
    assert_eq!(result.err(), Some(DistillError::MalformedMemoryRef));
}

#[test]
fn carry_forward_output_is_what_the_archive_holds() {
    let mut s = sources();
    s.push(entry(
        "01D",
        "Token sk_live_abcdefgh1234 rotated",
        &["billing"],
        DAY0,
    ));
    let input = DistillInput {
        sources: s,
        token_budget: 100_000,
    };
    let (archive, distillation) =
        build_archive(TENANT, REF, &input, &DeterministicDistiller, |s| {
            s.replace("sk_live_abcdefgh1234", "[REDACTED:stripe]")
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!archive.summary.contains("sk_live"));
    assert!(archive.summary.contains("[REDACTED:stripe]"));
    assert_eq!(archive.summary, distillation.summary);
    assert_eq!(
        archive.output_tokens as usize,
        distill::count(&archive.summary)
    );
    assert_eq!(
        archive.tokens_used,
        archive.input_tokens + archive.output_tokens
    );
}

#[test]
fn archive_new_refuses_a_distillation_for_another_budget() {
    let input = DistillInput {
        sources: sources(),
        token_budget: 100_000,
    };
    let d = DeterministicDistiller
        .distill(&DistillInput {
            sources: sources(),
            token_budget: 50_000,
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        Archive::new(TENANT, REF, &input, DETERMINISTIC_VERSION, &d),
        Err(DistillError::MalformedArchive(_))
    ));
}

/// A stand-in for a future LLM-backed distiller: same trait, same input checks, its own
/// version; it writes the newest source's first line.
struct FirstLine;

impl Distiller for FirstLine {
    fn version(&self) -> &'static str {
        "test.first-line/1"
    }

    fn distill(&self, input: &DistillInput) -> Result<distill::Distillation, DistillError> {
        distill::check_input(input)?;
        let newest = input
            .sources
            .iter()
            .max_by_key(|s| (s.created_at_ms, std::cmp::Reverse(&s.id)))
            .ok_or(DistillError::NothingToDistill)?;
        let summary = newest.content.lines().next().unwrap_or_default().to_owned();
        let input_tokens = distill::distiller::source_tokens(newest);
        let output_tokens = distill::tokens::count_u32(&summary);
        Ok(distill::Distillation {
            summary,
            tokens_used: input_tokens + output_tokens,
            included_source_ids: vec![newest.id.clone()],
            input_tokens,
            output_tokens,
            token_budget: input.token_budget,
            newest_source_ms: newest.created_at_ms,
            facts_kept: 1,
            facts_found: 1,
        })
    }
}

#[test]
fn another_distiller_plugs_in_with_its_own_key() {
    let input = DistillInput {
        sources: sources(),
        token_budget: 100_000,
    };
    let (other, _) = build_archive(TENANT, REF, &input, &FirstLine, str::to_owned)
        .unwrap_or_else(|e| panic!("{e}"));
    let (ours, _) = build(sources(), 100_000);
    assert_eq!(other.distiller_version, "test.first-line/1");
    assert_eq!(other.summary, "Refund of [REDACTED:card-1] issued");
    assert_ne!(other.key(), ours.key(), "the version is part of the digest");
    assert_eq!(
        other.source_ids, ours.source_ids,
        "every source is the run's"
    );
    assert_eq!(other.sources_included, 1);
}
