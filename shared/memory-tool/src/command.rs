//! The tool call's `input` exactly as the model emits it for `memory_20250818` (the shapes of
//! the Anthropic SDK's `BetaMemoryTool20250818*Command` types), decoded once into one enum.

use serde::Deserialize;

#[derive(Clone, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    View {
        path: String,
        #[serde(default)]
        view_range: Option<Vec<i64>>,
    },
    Create {
        path: String,
        file_text: String,
    },
    StrReplace {
        path: String,
        old_str: String,
        new_str: String,
    },
    Insert {
        path: String,
        insert_line: i64,
        insert_text: String,
    },
    Delete {
        path: String,
    },
    Rename {
        old_path: String,
        new_path: String,
    },
}

impl Command {
    /// The command's name, for logs (paths and text are never logged).
    pub fn name(&self) -> &'static str {
        match self {
            Command::View { .. } => "view",
            Command::Create { .. } => "create",
            Command::StrReplace { .. } => "str_replace",
            Command::Insert { .. } => "insert",
            Command::Delete { .. } => "delete",
            Command::Rename { .. } => "rename",
        }
    }

    /// Whether the command can change what is stored.
    pub fn writes(&self) -> bool {
        !matches!(self, Command::View { .. })
    }
}

/// Counts only: a command's text never reaches a formatter.
impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
