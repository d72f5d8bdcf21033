//! MEMORY-INDEX.json / .md against RFC 0062 run contract §5: a defined shape,
//! idempotent updates (no `workspace.updated` for a rerun), forget support, no entry content.

mod common;

use common::*;
use distill::archive::build_archive;
use distill::index::{from_json_bytes, remove_where, render_markdown, to_json_bytes, upsert};
use distill::keys::archive_key;
use distill::{
    Archive, DeterministicDistiller, DistillError, DistillInput, IndexLine, MemoryIndex,
    INDEX_FORMAT, MAX_INDEX_LINES,
};

const NOW: i64 = DAY0 + 10 * DAY;

fn archive(sources: Vec<SourceEntry>) -> Archive {
    let input = DistillInput {
        sources,
        token_budget: 100_000,
    };
    build_archive(TENANT, REF, &input, &DeterministicDistiller, str::to_owned)
        .map(|(a, _)| a)
        .unwrap_or_else(|e| panic!("{e}"))
}

use distill::SourceEntry;

fn sample_archive() -> Archive {
    archive(vec![
        entry("01A", "Customer prefers email", &["preference"], DAY0),
        entry(
            "01B",
            "Lives at 12 Secret Street",
            &["customer:alice@example.com"],
            DAY0 + DAY,
        ),
    ])
}

fn line(i: i64) -> IndexLine {
    let digest = format!("{:064x}", i);
    IndexLine {
        archive_key: archive_key(REF, &digest).unwrap_or_default(),
        digest,
        output_entry_id: format!("01JD{i:022}"),
        created_at_ms: DAY0 + i * 1_000,
        source_count: 1,
        tokens_used: 10,
        token_budget: 100,
        tags: vec![],
    }
}

#[test]
fn a_line_comes_from_an_archive_without_content() {
    let archive = sample_archive();
    let line = IndexLine::from_archive(&archive).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(line.archive_key, archive.key().unwrap_or_default());
    assert_eq!(line.output_entry_id, archive.output_entry_id);
    assert_eq!(line.created_at_ms, DAY0 + DAY);
    assert_eq!(line.source_count, 2);
    assert_eq!(
        line.tags,
        vec!["preference"],
        "key:value tags are content-like"
    );

    let (index, changed) = upsert(None, REF, line, NOW).unwrap_or_else(|e| panic!("{e}"));
    assert!(changed);
    let json = String::from_utf8(to_json_bytes(&index)).unwrap_or_default();
    let md = render_markdown(&index);
    for text in [&json, &md] {
        for fragment in ["Secret Street", "alice", "prefers email", "Customer"] {
            assert!(!text.contains(fragment), "{fragment} leaked into {text}");
        }
    }
}

#[test]
fn json_shape_and_round_trip() {
    let archive = sample_archive();
    let line = IndexLine::from_archive(&archive).unwrap_or_else(|e| panic!("{e}"));
    let (index, _) = upsert(None, REF, line, NOW).unwrap_or_else(|e| panic!("{e}"));
    let bytes = to_json_bytes(&index);
    let text = String::from_utf8(bytes.clone()).unwrap_or_default();
    let expected = format!(
        "{{\"format\":\"{INDEX_FORMAT}\",\"memoryRef\":\"{REF}\",\"updatedAt\":\"2026-11-30T00:00:00.000Z\",\
         \"entries\":[{{\"archiveKey\":\"t-1/agents/a-1/archives/{d}.json\",\"digest\":\"{d}\",\
         \"outputEntryId\":\"{id}\",\"createdAt\":\"2026-11-21T00:00:00.000Z\",\"sourceCount\":2,\
         \"tokensUsed\":{used},\"tokenBudget\":100000,\"tags\":[\"preference\"]}}]}}\n",
        d = archive.digest,
        id = archive.output_entry_id,
        used = archive.tokens_used,
    );
    assert_eq!(text, expected);
    println!("{text}");
    println!("{}", render_markdown(&index));
    let back = from_json_bytes(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, index);
    assert_eq!(to_json_bytes(&back), bytes);
}

#[test]
fn upserting_the_same_archive_twice_changes_nothing() {
    let first = upsert(None, REF, line(1), NOW)
        .unwrap_or_else(|e| panic!("{e}"))
        .0;
    let (second, changed) =
        upsert(Some(first.clone()), REF, line(1), NOW + DAY).unwrap_or_else(|e| panic!("{e}"));
    assert!(!changed);
    assert_eq!(second, first, "updatedAt does not move either");
    assert_eq!(to_json_bytes(&second), to_json_bytes(&first));

    let (third, changed) =
        upsert(Some(second), REF, line(2), NOW + DAY).unwrap_or_else(|e| panic!("{e}"));
    assert!(changed);
    assert_eq!(third.updated_at_ms, NOW + DAY);
    assert_eq!(third.entries.len(), 2);
}

#[test]
fn lines_are_newest_first_bounded_and_unique() {
    let mut index: Option<MemoryIndex> = None;
    // Insert out of order, some twice.
    let mut order: Vec<i64> = (0..150).collect();
    Rng(3).shuffle(&mut order);
    order.extend([149, 120, 60]);
    for i in order {
        index = Some(
            upsert(index, REF, line(i), NOW)
                .unwrap_or_else(|e| panic!("{e}"))
                .0,
        );
    }
    let index = index.unwrap_or_else(|| panic!("index"));
    assert_eq!(index.entries.len(), MAX_INDEX_LINES);
    let created: Vec<i64> = index.entries.iter().map(|l| l.created_at_ms).collect();
    let expected: Vec<i64> = (50..150).rev().map(|i| DAY0 + i * 1_000).collect();
    assert_eq!(created, expected);
    // An archive older than every kept line falls off at once: no change.
    let (_, changed) =
        upsert(Some(index), REF, line(10), NOW + DAY).unwrap_or_else(|e| panic!("{e}"));
    assert!(!changed);
}

#[test]
fn equal_instants_sort_by_archive_key() {
    let mut a = line(1);
    let mut b = line(2);
    a.created_at_ms = DAY0;
    b.created_at_ms = DAY0;
    let one = upsert(None, REF, b.clone(), NOW).map(|r| r.0).ok();
    let one = upsert(one, REF, a.clone(), NOW).map(|r| r.0).ok();
    let two = upsert(None, REF, a, NOW).map(|r| r.0).ok();
    let two = upsert(two, REF, b, NOW).map(|r| r.0).ok();
    assert_eq!(one, two);
}

#[test]
fn forget_removes_lines_and_reports_the_count() {
    let mut index = None;
    for i in 0..5 {
        index = upsert(index, REF, line(i), NOW).map(|r| r.0).ok();
    }
    let index = index.unwrap_or_else(|| panic!("index"));
    let gone = [line(1).archive_key, line(3).archive_key];
    let (after, removed) =
        remove_where(index.clone(), |l| gone.contains(&l.archive_key), NOW + DAY);
    assert_eq!(removed, 2);
    assert_eq!(after.entries.len(), 3);
    assert_eq!(after.updated_at_ms, NOW + DAY);
    let (same, removed) = remove_where(after.clone(), |_| false, NOW + 2 * DAY);
    assert_eq!(
        (removed, &same),
        (0, &after),
        "nothing removed, nothing changes"
    );
}

#[test]
fn another_refs_lines_and_indexes_are_refused() {
    let other = "workspaces/t-2/agents/a-1/memories";
    let mut foreign = line(1);
    foreign.archive_key = archive_key(other, &foreign.digest).unwrap_or_default();
    assert_eq!(
        upsert(None, REF, foreign, NOW).err(),
        Some(DistillError::IndexRefMismatch)
    );
    let theirs = upsert(
        None,
        other,
        {
            let mut l = line(1);
            l.archive_key = archive_key(other, &l.digest).unwrap_or_default();
            l
        },
        NOW,
    )
    .map(|r| r.0)
    .ok();
    assert_eq!(
        upsert(theirs, REF, line(2), NOW).err(),
        Some(DistillError::IndexRefMismatch)
    );
}

#[test]
fn from_json_rejects_foreign_documents() {
    let index = upsert(None, REF, line(1), NOW)
        .map(|r| r.0)
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8(to_json_bytes(&index)).unwrap_or_default();
    for bad in [
        text.replace(INDEX_FORMAT, "wop-memory.index/v9"),
        text.replace("t-1/agents/a-1/archives/", "t-2/agents/a-1/archives/"),
        text.replace("\"tags\":[]", "\"tags\":[],\"content\":\"x\""),
        text.replace("2026-11-30T00:00:00.000Z", "yesterday"),
        "[]".to_owned(),
    ] {
        assert!(
            matches!(
                from_json_bytes(bad.as_bytes()),
                Err(DistillError::MalformedIndex(_))
            ),
            "accepted {bad}"
        );
    }
}

#[test]
fn markdown_sibling_lists_the_lines() {
    let mut index = None;
    for i in 0..2 {
        let mut l = line(i);
        l.tags = vec!["billing".into(), "preference".into()];
        index = upsert(index, REF, l, NOW).map(|r| r.0).ok();
    }
    let index = index.unwrap_or_else(|| panic!("index"));
    let md = render_markdown(&index);
    assert!(md.starts_with("# Memory index\n\n- memoryRef: `workspaces/t-1/agents/a-1/memories`\n"));
    assert!(md.contains("- archives: 2 (newest first, at most 100)\n"));
    assert_eq!(md.lines().filter(|l| l.starts_with("| 2026-")).count(), 2);
    assert!(md.contains("| billing, preference |"));
    let empty = MemoryIndex {
        memory_ref: REF.to_owned(),
        updated_at_ms: NOW,
        entries: vec![],
    };
    assert!(render_markdown(&empty).contains("_No distillation archives yet._"));
}
