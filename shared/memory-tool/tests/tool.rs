//! The memory tool over the in-memory ports: every command, the reference backend's result
//! strings, CTI-1, SR-1 and forget.

use std::sync::Arc;

use memory_core::forget::Forgetter;
use memory_core::writer::SecretInput;
use memory_core::{CoreError, TenantId, TenantScope};
use memory_testkit::in_memory::TestPorts;
use memory_tool::{Call, Command, MemoryTool, ToolResult};
use serde_json::{json, Value};

const REF: &str = "workspaces/acme/agents/bot/memories";
const SECRET: &str = "sk-live-0123456789abcdef";

struct World {
    ports: TestPorts,
    tool: MemoryTool,
    scope: TenantScope,
}

fn world() -> World {
    let ports = TestPorts::at(1_800_000_000_000);
    let secrets: Vec<SecretInput> =
        serde_json::from_value(json!([{"secretId": "stripe", "value": SECRET}]))
            .unwrap_or_else(|e| panic!("{e}"));
    let tool = MemoryTool::new(
        ports.writer(),
        ports.store.clone(),
        ports.clock.clone(),
        secrets,
    );
    let scope = TenantScope::new(TenantId::parse("acme").unwrap_or_else(|e| panic!("{e:?}")));
    World { ports, tool, scope }
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
        let e = w
            .err(json!({"command": "create", "path": path, "file_text": "x"}))
            .await;
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
    let counts = Forgetter::new(w.ports.core())
        .forget("acme", "customer-7")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
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
