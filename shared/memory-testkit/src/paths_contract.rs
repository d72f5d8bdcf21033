//! The behavioural contract of `PathStore`, run against the in-memory adapter here and the
//! DynamoDB adapter in `memory-aws` (`paths_suite!`): one path key is one item, claimed, moved
//! and released only under its condition and only together with the entries of the change.

use std::collections::BTreeSet;
use std::sync::Arc;

use memory_core::model::{StoredEntry, SubjectKey};
use memory_core::paths::{PathChange, PathRecord, PathStore, PathWrite};
use memory_core::ports::EntryStore;
use memory_core::StoreError;

use crate::contract::{entry, fresh_ref};

fn record(path: &str, e: &StoredEntry, subjects: &[&SubjectKey]) -> PathRecord {
    PathRecord {
        path: path.to_owned(),
        entry_id: e.entry.id.clone(),
        subjects: subjects.iter().map(|s| (*s).clone()).collect(),
    }
}

/// A new file: `e` put and `path` claimed for it.
fn created(path: &str, e: &StoredEntry) -> PathChange {
    PathChange {
        put: vec![e.clone()],
        paths: vec![claim(path, None, &[], Some(record(path, e, &[])))],
        ..PathChange::default()
    }
}

fn claim(
    key: &str,
    expect: Option<&StoredEntry>,
    read: &[&SubjectKey],
    then: Option<PathRecord>,
) -> PathWrite {
    PathWrite {
        key: key.to_owned(),
        expect: expect.map(|e| e.entry.id.clone()),
        read_subjects: read.iter().map(|s| (*s).clone()).collect(),
        then,
    }
}

fn conflict(result: Result<(), StoreError>) {
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "{result:?}"
    );
}

/// Two claims of one free key: the first lands with its entry, the second changes nothing.
pub async fn a_path_key_is_claimed_once(entries: Arc<dyn EntryStore>, paths: Arc<dyn PathStore>) {
    let (_, r) = fresh_ref("paths-claim");
    let (a, b) = (entry(&r, 1, "first", &[]), entry(&r, 2, "second", &[]));
    let key = "/memories/notes.md";
    let first = PathChange {
        put: vec![a.clone()],
        paths: vec![claim(
            key,
            None,
            &[],
            Some(record("/memories/Notes.md", &a, &[])),
        )],
        ..PathChange::default()
    };
    paths.change_paths(&r, &first).await.expect("claim");
    conflict(paths.change_paths(&r, &created(key, &b)).await);
    assert_eq!(
        entries.get(&b.key()).await.expect("get"),
        None,
        "the loser's entry is not stored"
    );
    assert_eq!(entries.get(&a.key()).await.expect("get"), Some(a.clone()));
    let held = paths.path(&r, key).await.expect("path").expect("record");
    assert_eq!(
        (held.path.as_str(), held.entry_id.as_str()),
        ("/memories/Notes.md", a.entry.id.as_str())
    );
    let (_, other) = fresh_ref("paths-claim");
    assert_eq!(
        paths.path(&other, key).await.expect("path"),
        None,
        "keys are per ref"
    );
}

/// A move lands only on the record and revisions read; a stale one changes neither entries nor
/// keys; a release frees the key for the next claim.
pub async fn path_changes_are_conditional_and_atomic(
    entries: Arc<dyn EntryStore>,
    paths: Arc<dyn PathStore>,
) {
    let (_, r) = fresh_ref("paths-move");
    let (a, b, c) = (
        entry(&r, 1, "v1", &[]),
        entry(&r, 2, "v2", &[]),
        entry(&r, 3, "v3", &[]),
    );
    let (from, to) = ("/memories/a.md", "/memories/b.md");
    paths
        .change_paths(&r, &created(from, &a))
        .await
        .expect("claim");
    // Stale: the destination is expected held by an entry that never held it.
    let stale = PathChange {
        put: vec![b.clone()],
        delete: vec![a.clone()],
        paths: vec![
            claim(from, Some(&a), &[], None),
            claim(to, Some(&c), &[], Some(record(to, &b, &[]))),
        ],
    };
    conflict(paths.change_paths(&r, &stale).await);
    assert_eq!(entries.get(&a.key()).await.expect("get"), Some(a.clone()));
    assert_eq!(entries.get(&b.key()).await.expect("get"), None);
    assert!(paths.path(&r, from).await.expect("path").is_some());
    // A stale revision of the entry: nothing either.
    let mut a_as_read = a.clone();
    a_as_read.entry.tags.push("edited-since".into());
    let stale_entry = PathChange {
        put: vec![b.clone()],
        delete: vec![a_as_read],
        paths: vec![
            claim(from, Some(&a), &[], None),
            claim(to, None, &[], Some(record(to, &b, &[]))),
        ],
    };
    conflict(paths.change_paths(&r, &stale_entry).await);
    assert_eq!(paths.path(&r, to).await.expect("path"), None);
    // As read: moved in one step.
    let moved = PathChange {
        put: vec![b.clone()],
        delete: vec![a.clone()],
        paths: vec![
            claim(from, Some(&a), &[], None),
            claim(to, None, &[], Some(record(to, &b, &[]))),
        ],
    };
    paths.change_paths(&r, &moved).await.expect("move");
    assert_eq!(paths.path(&r, from).await.expect("path"), None);
    assert_eq!(
        paths.path(&r, to).await.expect("path").map(|p| p.entry_id),
        Some(b.entry.id.clone())
    );
    assert_eq!(entries.get(&a.key()).await.expect("get"), None);
    // Released, the key takes a new claim.
    paths
        .change_paths(
            &r,
            &PathChange {
                delete: vec![b.clone()],
                paths: vec![claim(to, Some(&b), &[], None)],
                ..PathChange::default()
            },
        )
        .await
        .expect("release");
    paths
        .change_paths(&r, &created(to, &c))
        .await
        .expect("claim again");
}

/// Subject links follow the record: every listed subject finds the path, a subject dropped or
/// a released record finds nothing, and other tenants never see it.
pub async fn subject_links_follow_the_record(
    _entries: Arc<dyn EntryStore>,
    paths: Arc<dyn PathStore>,
) {
    let (tenant, r) = fresh_ref("paths-subjects");
    let (alice, bob) = (
        SubjectKey::derive(&tenant, "alice"),
        SubjectKey::derive(&tenant, "bob"),
    );
    let (a, b) = (entry(&r, 1, "by alice", &[]), entry(&r, 2, "and bob", &[]));
    let key = "/memories/c.md";
    paths
        .change_paths(
            &r,
            &PathChange {
                put: vec![a.clone()],
                paths: vec![claim(key, None, &[], Some(record(key, &a, &[&alice])))],
                ..PathChange::default()
            },
        )
        .await
        .expect("create");
    paths
        .change_paths(
            &r,
            &PathChange {
                put: vec![b.clone()],
                delete: vec![a.clone()],
                paths: vec![claim(
                    key,
                    Some(&a),
                    &[&alice],
                    Some(record(key, &b, &[&alice, &bob])),
                )],
            },
        )
        .await
        .expect("edit");
    for s in [&alice, &bob] {
        let found = paths.paths_of_subject(s).await.expect("links");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].memory_ref.clone(), found[0].key.as_str()),
            (r.clone(), key)
        );
        assert_eq!(found[0].record.entry_id, b.entry.id);
        let want: BTreeSet<SubjectKey> = [alice.clone(), bob.clone()].into();
        assert_eq!(found[0].record.subjects, want);
    }
    // Alice's digest asked for inside another tenant names nothing there.
    let (other, _) = fresh_ref("paths-subjects");
    let alice_in_other = SubjectKey::from_stored(&other, alice.as_str()).expect("digest");
    assert!(paths
        .paths_of_subject(&alice_in_other)
        .await
        .expect("links")
        .is_empty());
    paths
        .change_paths(
            &r,
            &PathChange {
                delete: vec![b.clone()],
                paths: vec![claim(key, Some(&b), &[&alice, &bob], None)],
                ..PathChange::default()
            },
        )
        .await
        .expect("release");
    for s in [&alice, &bob] {
        assert!(paths.paths_of_subject(s).await.expect("links").is_empty());
    }
}

#[macro_export]
macro_rules! paths_suite {
    ($stores:expr) => {
        $crate::paths_suite!(@each $stores; a_path_key_is_claimed_once,
            path_changes_are_conditional_and_atomic, subject_links_follow_the_record);
    };
    (@each $stores:expr; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (entries, paths) = $stores.await;
                $crate::paths_contract::$name(entries, paths).await;
            }
        )*
    };
}
