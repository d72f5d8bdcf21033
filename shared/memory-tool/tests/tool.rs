//! The memory tool over the in-memory ports: every command, the reference backend's result
//! strings, CTI-1, SR-1 and forget.

use std::sync::Arc;

use memory_core::events::ForgetCounts;
use memory_core::forget::Forgetter;
use memory_core::writer::SecretInput;
use memory_core::Timestamp;
use memory_core::{CoreError, TenantId, TenantScope};
use memory_testkit::in_memory::{InMemoryEntryStore, ManualClock, RecordingPublisher, TestPorts};
use memory_testkit::paths::InMemoryPathStore;
use memory_tool::{Call, Command, MemoryTool, PathForgetHook, ToolResult};
use serde_json::{json, Value};

const REF: &str = "workspaces/acme/agents/bot/memories";
const SECRET: &str = "sk-live-0123456789abcdef";

struct World {
    ports: TestPorts,
    paths: Arc<InMemoryPathStore>,
    tool: MemoryTool,
    scope: TenantScope,
}

fn world() -> World {
    let ports = TestPorts::at(1_800_000_000_000);
    let secrets: Vec<SecretInput> =
        serde_json::from_value(json!([{"secretId": "stripe", "value": SECRET}]))
            .unwrap_or_else(|e| panic!("{e}"));
    let paths = Arc::new(InMemoryPathStore::new(ports.store.clone()));
    let tool = MemoryTool::new(
        ports.writer(),
        ports.store.clone(),
        paths.clone(),
        ports.clock.clone(),
        secrets,
    );
    let scope = TenantScope::new(TenantId::parse("acme").unwrap_or_else(|e| panic!("{e:?}")));
    World {
        ports,
        paths,
        tool,
        scope,
    }
}

impl World {
    async fn run_on(
        &self,
        memory_ref: &str,
        subject: Option<&str>,
        input: Value,
    ) -> Result<ToolResult, CoreError> {
        let command: Command = serde_json::from_value(input).unwrap_or_else(|e| panic!("{e}"));
        let call = Call {
            scope: &self.scope,
            memory_ref,
            subject,
        };
        self.tool.execute(&call, &command).await
    }

    async fn ok(&self, input: Value) -> String {
        let r = self
            .run_on(REF, None, input)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!r.is_error, "{}", r.content);
        r.content
    }

    /// Runs the commands in order: each answers exactly `Ok(content)` or, as a tool error,
    /// `Err(content)`.
    async fn answers(&self, steps: Vec<(Value, Result<&str, &str>)>) {
        for (input, want) in steps {
            let got = match want {
                Ok(_) => Ok(self.ok(input.clone()).await),
                Err(_) => Err(self.err(input.clone()).await),
            };
            let got = got.as_ref().map(String::as_str).map_err(String::as_str);
            assert_eq!(got, want, "{input}");
        }
    }

    /// Forgets `subject` of tenant `acme`, file paths included.
    async fn forget(&self, subject: &str) -> ForgetCounts {
        Forgetter::new(self.ports.core())
            .with_hook(Arc::new(PathForgetHook {
                paths: self.paths.clone(),
            }))
            .forget("acme", subject)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn as_subject(&self, subject: &str, input: Value) -> String {
        let r = self
            .run_on(REF, Some(subject), input)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!r.is_error, "{}", r.content);
        r.content
    }

    /// The error answer to creating `path` (with a one-byte file).
    async fn refused_create(&self, path: &str) -> String {
        self.err(json!({"command": "create", "path": path, "file_text": "x"}))
            .await
    }

    async fn err(&self, input: Value) -> String {
        let r = self
            .run_on(REF, None, input)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(r.is_error, "{}", r.content);
        r.content
    }
}

#[tokio::test]
async fn every_command_answers_as_the_reference_backend() {
    let w = world();
    w.answers(vec![
        (json!({"command": "create", "path": "/memories/notes.md", "file_text": "alpha\nbeta\ngamma\n"}), Ok("File created successfully at: /memories/notes.md")),
        (json!({"command": "create", "path": "/memories/notes.md", "file_text": "x"}), Err("File /memories/notes.md already exists")),
        (json!({"command": "view", "path": "/memories/notes.md"}), Ok("Here's the content of /memories/notes.md with line numbers:\n     1\talpha\n     2\tbeta\n     3\tgamma\n     4\t")),
        (json!({"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]}), Ok("Here's the content of /memories/notes.md with line numbers:\n     2\tbeta\n     3\tgamma")),
        (json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "beta", "new_str": "BETA"}), Ok("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\talpha\n     2\tBETA\n     3\tgamma\n     4\t")),
        (json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "zeta", "new_str": ""}), Err("No replacement was performed, old_str `zeta` did not appear verbatim in /memories/notes.md.")),
        (json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "a", "new_str": ""}), Err("No replacement was performed. Multiple occurrences of old_str `a` in lines: 1, 1, 3, 3. Please ensure it is unique")),
        (json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "inserted\n"}), Ok("The file /memories/notes.md has been edited.")),
        (json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x"}), Err("Invalid `insert_line` parameter: 9. It should be within the range [0, 4].")),
    ])
    .await;
    w.ok(json!({"command": "create", "path": "/memories/dir/a.txt", "file_text": "0123456789"}))
        .await;
    w.ok(json!({"command": "create", "path": "/memories/dir/sub/deep/b.txt", "file_text": "xy"}))
        .await;
    w.ok(json!({"command": "create", "path": "/memories/.hidden", "file_text": "h"}))
        .await;
    w.answers(vec![
        (json!({"command": "view", "path": "/memories"}), Ok("Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n\
         38B\t/memories\n12B\t/memories/dir/\n10B\t/memories/dir/a.txt\n2B\t/memories/dir/sub/\n26B\t/memories/notes.md")),
        (json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/moved"}), Ok("Successfully renamed /memories/dir to /memories/moved")),
        (json!({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/moved/a.txt"}), Err("The destination /memories/moved/a.txt already exists")),
        (json!({"command": "view", "path": "/memories/moved/sub/deep/b.txt"}), Ok("Here's the content of /memories/moved/sub/deep/b.txt with line numbers:\n     1\txy")),
        (json!({"command": "view", "path": "/memories/dir/a.txt"}), Err("The path /memories/dir/a.txt does not exist. Please provide a valid path.")),
        (json!({"command": "delete", "path": "/memories/moved"}), Ok("Successfully deleted /memories/moved")),
        (json!({"command": "delete", "path": "/memories/moved"}), Err("The path /memories/moved does not exist")),
        (json!({"command": "delete", "path": "/memories"}), Err("Cannot delete the /memories directory itself")),
        (json!({"command": "str_replace", "path": "/memories", "old_str": "a", "new_str": "b"}), Err("The path /memories is not a file.")),
    ])
    .await;
    // Two files left (notes.md and .hidden), one entry each: every edit replaced its entry.
    assert_eq!(w.ports.store.dump().len(), 2);
}

#[tokio::test]
async fn paths_outside_the_root_are_refused_and_store_nothing() {
    let w = world();
    for path in [
        "/memories/../x",
        "/memories/%2e%2e/x",
        "/memories/..%2Fx",
        "/etc/passwd",
        "/memories//x",
        "/memories/a\\..\\b",
    ] {
        let e = w.refused_create(path).await;
        assert!(e.contains(path), "{e}");
    }
    assert!(w.ports.store.dump().is_empty());
}

#[tokio::test]
async fn secrets_are_redacted_and_foreign_refs_hold_nothing() {
    let w = world();
    w.ok(json!({"command": "create", "path": "/memories/k.md", "file_text": format!("key {SECRET}")})).await;
    let view = w
        .ok(json!({"command": "view", "path": "/memories/k.md"}))
        .await;
    assert!(view.ends_with("key [REDACTED:stripe]"), "{view}");
    let edit = w.ok(json!({"command": "str_replace", "path": "/memories/k.md", "old_str": "key", "new_str": SECRET})).await;
    assert!(!edit.contains(SECRET), "{edit}");
    assert!(w
        .ports
        .store
        .dump()
        .iter()
        .all(|e| !e.entry.content.contains(SECRET)));

    let foreign = "workspaces/other/agents/bot/memories";
    for bad_ref in [foreign, "workspaces/acme/agents/../memories", ""] {
        let on_bad_ref = |input: Value| w.run_on(bad_ref, None, input);
        let view = on_bad_ref(json!({"command": "view", "path": "/memories"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(view.content, "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n0B\t/memories");
        let file = on_bad_ref(json!({"command": "view", "path": "/memories/k.md"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(file.is_error);
        let create =
            on_bad_ref(json!({"command": "create", "path": "/memories/x", "file_text": "x"})).await;
        assert_eq!(create.err(), Some(CoreError::RefNotAdmitted));
    }
}

#[tokio::test]
async fn forget_reaches_files_and_their_later_versions() {
    let w = world();
    let create =
        json!({"command": "create", "path": "/memories/customer.md", "file_text": "likes tea"});
    let r = w
        .run_on(REF, Some("customer-7"), create)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!r.is_error);
    w.ok(json!({"command": "str_replace", "path": "/memories/customer.md", "old_str": "tea", "new_str": "coffee"})).await;
    w.ok(json!({"command": "rename", "old_path": "/memories/customer.md", "new_path": "/memories/c.md"})).await;
    let counts = w.forget("customer-7").await;
    assert_eq!(counts.deleted_entries, 1);
    let e = w
        .err(json!({"command": "view", "path": "/memories/c.md"}))
        .await;
    assert!(
        e.starts_with("The path /memories/c.md does not exist"),
        "{e}"
    );
    let _ = Arc::strong_count(&w.ports.store);
}

#[tokio::test]
async fn forget_erases_every_file_a_subject_contributed_to() {
    let w = world();
    // alice writes, bob and carol edit, dave renames; a file of erin's alone stays.
    w.as_subject(
        "alice",
        json!({"command": "create", "path": "/memories/shared.md", "file_text": "alice-word\n"}),
    )
    .await;
    w.as_subject("bob", json!({"command": "str_replace", "path": "/memories/shared.md", "old_str": "alice-word", "new_str": "alice-word bob-word"})).await;
    w.as_subject("carol", json!({"command": "insert", "path": "/memories/shared.md", "insert_line": 1, "insert_text": "carol-word"})).await;
    w.as_subject("dave", json!({"command": "rename", "old_path": "/memories/shared.md", "new_path": "/memories/dir/moved.md"})).await;
    w.as_subject(
        "erin",
        json!({"command": "create", "path": "/memories/erin.md", "file_text": "erin-word"}),
    )
    .await;
    w.as_subject(
        "alice",
        json!({"command": "create", "path": "/memories/dir/other.md", "file_text": "alice-only"}),
    )
    .await;
    w.as_subject(
        "bob",
        json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/d2"}),
    )
    .await;
    assert!(w
        .ports
        .store
        .dump()
        .iter()
        .any(|e| e.entry.content.contains("alice-word")));
    let counts = w.forget("alice").await;
    assert_eq!(counts.deleted_entries, 2, "{counts:?}");
    let left = w.ports.store.dump();
    assert!(
        left.iter().all(|e| !e.entry.content.contains("alice")),
        "alice's words remain"
    );
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].entry.content, "erin-word");
    // No path key of a forgotten file is left, and its path is free again.
    let keys: Vec<String> = w
        .paths
        .dump()
        .await
        .into_iter()
        .map(|(_, k, _)| k)
        .collect();
    assert_eq!(keys, ["/memories/erin.md"]);
    w.ok(json!({"command": "create", "path": "/memories/d2/moved.md", "file_text": "new"}))
        .await;
    // Forgetting again finds nothing more.
    let again = w.forget("alice").await;
    assert_eq!(again.deleted_entries, 0);
    // A subject that only edited reaches the file too.
    let counts = w.forget("erin").await;
    assert_eq!(counts.deleted_entries, 1);
}

#[tokio::test]
async fn empty_files_secret_paths_and_aliasing_names() {
    let w = world();
    w.answers(vec![
        (json!({"command": "create", "path": "/memories/empty.md", "file_text": ""}), Ok("File created successfully at: /memories/empty.md")),
        (json!({"command": "view", "path": "/memories/empty.md"}), Ok("Here's the content of /memories/empty.md with line numbers:\n     1\t")),
        (json!({"command": "create", "path": "/memories/X.md", "file_text": "x"}), Ok("File created successfully at: /memories/X.md")),
        (json!({"command": "create", "path": "/memories/x.md", "file_text": "x"}), Err("Cannot use /memories/x.md: /memories/X.md exists, and the two differ only in case (one file on a case-insensitive filesystem). Use /memories/X.md, or another name.")),
        (json!({"command": "rename", "old_path": "/memories/empty.md", "new_path": "/memories/x.MD"}), Err("Cannot use /memories/x.MD: /memories/X.md exists, and the two differ only in case (one file on a case-insensitive filesystem). Use /memories/X.md, or another name.")),
        (json!({"command": "rename", "old_path": "/memories/X.md", "new_path": "/memories/x.md"}), Ok("Successfully renamed /memories/X.md to /memories/x.md")),
        (json!({"command": "create", "path": "/memories/Dir/a.md", "file_text": "a"}), Ok("File created successfully at: /memories/Dir/a.md")),
        (json!({"command": "create", "path": "/memories/dir/b.md", "file_text": "b"}), Err("Cannot use /memories/dir/b.md: /memories/Dir exists, and the two differ only in case (one file on a case-insensitive filesystem). Use /memories/Dir, or another name.")),
    ])
    .await;
    for bad in [
        "/memories/CON",
        "/memories/nul.txt",
        "/memories/a/com1.md",
        "/memories/dot.",
        "/memories/LPT3",
    ] {
        let e = w.refused_create(bad).await;
        assert!(e.contains("Windows"), "{bad}: {e}");
    }
    let before = w.ports.store.dump().len();
    for call in [
        json!({"command": "create", "path": format!("/memories/{SECRET}.md"), "file_text": "x"}),
        json!({"command": "view", "path": format!("/memories/{SECRET}.md")}),
        json!({"command": "rename", "old_path": "/memories/x.md", "new_path": format!("/memories/{SECRET}")}),
    ] {
        let e = w.err(call).await;
        assert!(
            e.contains("configured secret") && !e.contains(SECRET),
            "{e}"
        );
    }
    assert_eq!(w.ports.store.dump().len(), before);
}

#[tokio::test]
async fn a_directory_rename_is_all_or_nothing() {
    let w = world();
    for i in 0..10 {
        w.ok(json!({"command": "create", "path": format!("/memories/dir/f{i}.md"), "file_text": format!("{i}")})).await;
    }
    // The store fails the one write: nothing moved.
    w.ports.store.calls.fail_on("change_paths", 1);
    let failed = w
        .run_on(
            REF,
            None,
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/new"}),
        )
        .await;
    assert!(failed.is_err(), "{failed:?}");
    let view = w.ok(json!({"command": "view", "path": "/memories"})).await;
    assert!(
        view.contains("/memories/dir/") && !view.contains("/memories/new"),
        "{view}"
    );
    w.ok(json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/new"}))
        .await;
    for i in 0..10 {
        w.ok(json!({"command": "view", "path": format!("/memories/new/f{i}.md")}))
            .await;
    }
    // Above the bound: refused, nothing moved.
    for i in 0..memory_tool::tool::MAX_RENAME_FILES {
        w.ok(json!({"command": "create", "path": format!("/memories/big/f{i}.md"), "file_text": "x"})).await;
    }
    w.ok(json!({"command": "rename", "old_path": "/memories/big", "new_path": "/memories/big2"}))
        .await;
    w.ok(json!({"command": "create", "path": "/memories/big2/one-more.md", "file_text": "x"}))
        .await;
    let e = w.err(json!({"command": "rename", "old_path": "/memories/big2", "new_path": "/memories/big3"})).await;
    assert!(e.contains("at most 24 files"), "{e}");
    w.ok(json!({"command": "view", "path": "/memories/big2/one-more.md"}))
        .await;
}

#[tokio::test]
async fn the_largest_file_is_cheap_for_every_command() {
    let w = world();
    let text = "\n".repeat(65_520);
    w.ok(json!({"command": "create", "path": "/memories/big.md", "file_text": text}))
        .await;
    let started = std::time::Instant::now();
    let e = w.err(json!({"command": "str_replace", "path": "/memories/big.md", "old_str": "\n", "new_str": "x"})).await;
    assert!(
        e.ends_with("65519, 65520. Please ensure it is unique"),
        "{}",
        &e[e.len() - 80..]
    );
    let huge = "y".repeat(1 << 20);
    let e = w.err(json!({"command": "str_replace", "path": "/memories/missing.md", "old_str": huge, "new_str": "x"})).await;
    assert!(e.contains("longer than the largest file"), "{e}");
    w.ok(json!({"command": "insert", "path": "/memories/big.md", "insert_line": 30_000, "insert_text": "mid"})).await;
    w.ok(json!({"command": "str_replace", "path": "/memories/big.md", "old_str": "mid", "new_str": "middle"})).await;
    w.ok(json!({"command": "view", "path": "/memories/big.md"}))
        .await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// Two callers race create, rename and delete on one path, 50 rounds: one path is one file
/// and every acknowledged operation is what the store holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creates_renames_and_deletes_keep_one_file_per_path() {
    let ports = TestPorts {
        store: Arc::new(InMemoryEntryStore::racing()),
        events: Arc::new(RecordingPublisher::new()),
        clock: Arc::new(ManualClock::at(Timestamp::from_millis(1_800_000_000_000))),
    };
    let paths = Arc::new(InMemoryPathStore::new(ports.store.clone()));
    let tool = Arc::new(MemoryTool::new(
        ports.writer(),
        ports.store.clone(),
        paths.clone(),
        ports.clock.clone(),
        Vec::new(),
    ));
    let scope = Arc::new(TenantScope::new(
        TenantId::parse("acme").unwrap_or_else(|e| panic!("{e:?}")),
    ));
    let run = |input: Value| {
        let (tool, scope) = (tool.clone(), scope.clone());
        async move {
            let command: Command = serde_json::from_value(input).unwrap_or_else(|e| panic!("{e}"));
            let call = Call {
                scope: &scope,
                memory_ref: REF,
                subject: None,
            };
            tool.execute(&call, &command)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    for round in 0..50 {
        let target = format!("/memories/t{round}.md");
        run(json!({"command": "create", "path": format!("/memories/a{round}.md"), "file_text": "from a"})).await;
        run(json!({"command": "create", "path": format!("/memories/b{round}.md"), "file_text": "from b"})).await;
        let calls = [
            json!({"command": "rename", "old_path": format!("/memories/a{round}.md"), "new_path": target}),
            json!({"command": "rename", "old_path": format!("/memories/b{round}.md"), "new_path": target}),
            json!({"command": "create", "path": target, "file_text": "created"}),
            json!({"command": "create", "path": target, "file_text": "created too"}),
        ];
        let outcomes: Vec<ToolResult> =
            futures_join(calls.iter().cloned().map(&run).collect()).await;
        let won: Vec<usize> = (0..4).filter(|i| !outcomes[*i].is_error).collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        let want = ["from a", "from b", "created", "created too"][won[0]];
        let view = run(json!({"command": "view", "path": target})).await;
        assert!(
            view.content.ends_with(&format!("\t{want}")),
            "round {round}: {view:?}"
        );
        let at: Vec<_> = ports
            .store
            .dump()
            .into_iter()
            .filter(|e| e.entry.tags.contains(&format!("memory-tool:path:{target}")))
            .collect();
        assert_eq!(at.len(), 1, "round {round}");
        // Racing deletes: one answers success, and the path is free afterwards.
        let deletes: Vec<ToolResult> = futures_join(vec![
            run(json!({"command": "delete", "path": target})),
            run(json!({"command": "delete", "path": target})),
        ])
        .await;
        assert_eq!(
            deletes.iter().filter(|d| !d.is_error).count(),
            1,
            "{deletes:?}"
        );
        assert!(
            run(json!({"command": "view", "path": target}))
                .await
                .is_error
        );
    }
}

/// Runs the futures at once on the runtime's threads, answers in order.
async fn futures_join<F>(futures: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap_or_else(|e| panic!("{e}")));
    }
    out
}
