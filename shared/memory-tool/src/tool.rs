//! The memory tool's six commands (`view`, `create`, `str_replace`, `insert`, `delete`,
//! `rename`) over the entries of one memoryRef, with the result strings of the Anthropic SDK's
//! reference backend (`BetaLocalFilesystemMemoryTool`), so a model sees what it was trained on.
//!
//! A file is one entry: the content is the file's text, the tag `memory-tool:path:<path>` names
//! it and `memory-tool:file` marks it as a file (directories exist only as prefixes of paths).
//! CTI-1: a malformed or foreign memoryRef has no files (views are empty, other commands find
//! nothing), and a write to it is refused as the write contract refuses it. SR-1: every write
//! is a [`MemoryWriter`] call with the configured secrets, so what a later `view` shows is the
//! redacted text. Edits (`str_replace`, `insert`, `rename`) are conditional rewrites
//! ([`MemoryWriter::put_replacing`]): they land only if the file is still the revision they read,
//! and re-read and re-apply otherwise, so two racing edits never lose one another.

use std::collections::BTreeMap;
use std::sync::Arc;

use memory_core::listing::{ListOptions, MAX_LIST_LIMIT};
use memory_core::model::{EntryKey, StoredEntry};
use memory_core::ports::{Clock, EntryStore};
use memory_core::reader::MemoryReader;
use memory_core::tag_filter::TagFilter;
use memory_core::writer::{
    registry_from, EntryInput, MemoryWriter, PutRequest, SecretInput, MAX_CONTENT_BYTES,
};
use memory_core::{CoreError, MemoryRef, StoreError, TenantScope};
use serde::Serialize;

use crate::command::Command;
use crate::path::MemPath;

/// The tag every file carries, so a directory view is one tag list.
pub const FILE_TAG: &str = "memory-tool:file";
/// Files one memoryRef may hold: a directory view reads them all.
pub const MAX_FILES: usize = 1000;
/// The longest file the tool documents (`BetaLocalFilesystemMemoryTool.MAX_LINES`).
pub const MAX_LINES: usize = 999_999;
/// A file's bytes: the bound of every entry's content.
pub const MAX_FILE_BYTES: usize = MAX_CONTENT_BYTES;
const LINE_NUMBER_WIDTH: usize = 6;
/// Tries of an edit that keeps losing its conditional write to other edits of the same file.
const ATTEMPTS: usize = 5;
/// Entries read per lookup of one path (one file, or a few while a create race settles).
const LOOKUP_LIMIT: u32 = 16;

/// What the model is given back: the text of a `tool_result`, and whether it is an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolResult {
    pub content: String,
    pub is_error: bool,
}

/// Who calls, on which memoryRef, and the data subject new files are written with (so forget
/// reaches them); the subject is never logged.
pub struct Call<'a> {
    pub scope: &'a TenantScope,
    pub memory_ref: &'a str,
    pub subject: Option<&'a str>,
}

/// A command that did not complete: a result the model is shown (`is_error`), or a failure of
/// the request itself (the HTTP envelope).
pub enum Fail {
    Tool(String),
    Core(CoreError),
}

impl From<CoreError> for Fail {
    fn from(e: CoreError) -> Self {
        Fail::Core(e)
    }
}

impl From<String> for Fail {
    fn from(message: String) -> Self {
        Fail::Tool(message)
    }
}

type Step<T> = Result<T, Fail>;

/// A file as a directory view shows it.
struct Listed {
    path: MemPath,
    bytes: usize,
}

#[derive(Clone)]
pub struct MemoryTool {
    writer: MemoryWriter,
    reader: MemoryReader,
    store: Arc<dyn EntryStore>,
    clock: Arc<dyn Clock>,
    secrets: Vec<SecretInput>,
}

impl MemoryTool {
    /// `secrets` are the server's configured SR-1 secrets, applied to every write.
    pub fn new(
        writer: MemoryWriter,
        store: Arc<dyn EntryStore>,
        clock: Arc<dyn Clock>,
        secrets: Vec<SecretInput>,
    ) -> Self {
        MemoryTool {
            writer,
            reader: MemoryReader::new(store.clone(), clock.clone()),
            store,
            clock,
            secrets,
        }
    }

    /// Runs one command. `Err` only for what the model cannot act on: a write to a ref that is
    /// not the caller's, an edit that lost every try, a store failure.
    pub async fn execute(
        &self,
        call: &Call<'_>,
        command: &Command,
    ) -> Result<ToolResult, CoreError> {
        let memory_ref = call.scope.admit(call.memory_ref);
        let r = memory_ref.as_ref();
        let outcome = match command {
            Command::View { path, view_range } => {
                self.view(call, r, path, view_range.as_deref()).await
            }
            Command::Create { path, file_text } => self.create(call, r, path, file_text).await,
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => self.str_replace(call, r, path, old_str, new_str).await,
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(call, r, path, *insert_line, insert_text).await,
            Command::Delete { path } => self.delete(call, r, path).await,
            Command::Rename { old_path, new_path } => {
                self.rename(call, r, old_path, new_path).await
            }
        };
        match outcome {
            Ok(content) => Ok(ToolResult {
                content,
                is_error: false,
            }),
            Err(Fail::Tool(content)) => Ok(ToolResult {
                content,
                is_error: true,
            }),
            // A bound of the write contract (names a field and a limit, never a value): the
            // model can shorten its text.
            Err(Fail::Core(e @ CoreError::Invalid { .. })) => Ok(ToolResult {
                content: format!("Error: {e}"),
                is_error: true,
            }),
            Err(Fail::Core(e)) => Err(e),
        }
    }

    /// The live entries at `path`, oldest id first. More than one exists only while two
    /// creates of the same path race (`create` settles it); the oldest is the file.
    ///
    /// A rewrite puts the new entry's posting before its transaction and removes the old one's
    /// after, so a path with a live file always has a posting; but the postings and the entries
    /// are two reads, and a rewrite can land between them (the posting read names the old entry,
    /// which is gone when it is fetched). Postings that name only vanished entries are therefore
    /// read again; no postings at all means no file.
    async fn at(&self, r: &MemoryRef, path: &MemPath) -> Result<Vec<StoredEntry>, CoreError> {
        let tag = path.tag();
        for _ in 0..ATTEMPTS {
            let ids = self.store.tag_postings(r, &tag, None, LOOKUP_LIMIT).await?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let keys: Vec<EntryKey> = ids
                .into_iter()
                .map(|id| EntryKey {
                    memory_ref: r.clone(),
                    id,
                })
                .collect();
            let now = self.clock.now();
            let mut found: Vec<StoredEntry> = self
                .store
                .get_many(&keys)
                .await?
                .into_iter()
                .filter(|s| &s.memory_ref == r && s.entry.is_live_at(now))
                .filter(|s| s.entry.tags.contains(&tag))
                .collect();
            if !found.is_empty() {
                found.sort_by(|a, b| a.entry.id.cmp(&b.entry.id));
                return Ok(found);
            }
        }
        Ok(Vec::new())
    }

    async fn file(&self, r: &MemoryRef, path: &MemPath) -> Result<Option<StoredEntry>, CoreError> {
        Ok(self.at(r, path).await?.into_iter().next())
    }

    /// Every file of the ref (at most [`MAX_FILES`]), by path; `[]` for a ref that is not the
    /// caller's (CTI-1).
    async fn files(&self, call: &Call<'_>) -> Result<Vec<Listed>, CoreError> {
        let mut by_path: BTreeMap<MemPath, (String, usize)> = BTreeMap::new();
        let mut cursor = None;
        let mut seen = 0usize;
        loop {
            let options = ListOptions {
                limit: Some(MAX_LIST_LIMIT),
                tags: TagFilter::new(vec![FILE_TAG.to_owned()], Vec::new())?,
                cursor,
            };
            let page = self
                .reader
                .list(call.scope, call.memory_ref, &options)
                .await?;
            for entry in page.entries {
                seen += 1;
                let Some(path) = entry.tags.iter().find_map(|t| MemPath::from_tag(t)) else {
                    continue;
                };
                let slot = by_path
                    .entry(path)
                    .or_insert((entry.id.clone(), entry.content.len()));
                if entry.id < slot.0 {
                    *slot = (entry.id.clone(), entry.content.len());
                }
            }
            cursor = page.next_cursor;
            if cursor.is_none() || seen >= MAX_FILES {
                break;
            }
        }
        Ok(by_path
            .into_iter()
            .map(|(path, (_, bytes))| Listed { path, bytes })
            .collect())
    }

    /// The text as it will be stored (SR-1 with the configured secrets), for results that
    /// quote it.
    fn stored_form(&self, text: &str) -> Result<String, CoreError> {
        Ok(registry_from(&self.secrets)?
            .redactor()
            .redact(text)
            .into_owned())
    }

    fn request(&self, call: &Call<'_>, path: &MemPath, content: String) -> PutRequest {
        PutRequest {
            tenant_id: call.scope.tenant().as_str().to_owned(),
            run_id: None,
            memory_ref: call.memory_ref.to_owned(),
            entries: vec![EntryInput {
                content,
                tags: vec![FILE_TAG.to_owned(), path.tag()],
                expires_at: None,
                subject: call.subject.map(str::to_owned),
                tier: None,
            }],
            secrets: self.secrets.clone(),
            attribution: Default::default(),
            idempotency_key: None,
        }
    }

    fn check_size(raw: &str, text: &str) -> Step<()> {
        if text.len() > MAX_FILE_BYTES {
            return Err(Fail::Tool(format!(
                "File {raw} would exceed the maximum file size of {MAX_FILE_BYTES} bytes."
            )));
        }
        if text.split('\n').count() > MAX_LINES {
            return Err(Fail::Tool(format!(
                "File {raw} exceeds maximum line limit of 999,999 lines."
            )));
        }
        Ok(())
    }

    fn missing(raw: &str) -> Fail {
        Fail::Tool(format!(
            "The path {raw} does not exist. Please provide a valid path."
        ))
    }

    /// The answer for an edit of a path that holds no file: a directory, or nothing.
    async fn not_a_file(&self, call: &Call<'_>, raw: &str, path: &MemPath) -> Fail {
        match self.files(call).await {
            Ok(files) if path.is_root() || files.iter().any(|f| f.path.is_below(path)) => {
                Fail::Tool(format!("The path {raw} is not a file."))
            }
            Ok(_) => Self::missing(raw),
            Err(e) => Fail::Core(e),
        }
    }

    /// An edit: `apply` turns the file's text into the new text (or a tool error); the rewrite
    /// lands only on the revision it read, and is retried on a newer one otherwise.
    async fn edit<F>(
        &self,
        call: &Call<'_>,
        r: Option<&MemoryRef>,
        raw: &str,
        apply: F,
    ) -> Step<(String, String)>
    where
        F: Fn(&str) -> Step<String>,
    {
        let path = MemPath::parse(raw)?;
        let Some(r) = r else {
            return Err(Self::missing(raw));
        };
        for _ in 0..ATTEMPTS {
            if path.is_root() {
                return Err(self.not_a_file(call, raw, &path).await);
            }
            let Some(file) = self.file(r, &path).await? else {
                return Err(self.not_a_file(call, raw, &path).await);
            };
            let new_text = apply(&file.entry.content)?;
            Self::check_size(raw, &new_text)?;
            let request = self.request(call, &path, new_text.clone());
            match self
                .writer
                .put_replacing(&request, std::slice::from_ref(&file))
                .await
            {
                Ok(_) => return Ok((file.entry.content, new_text)),
                Err(CoreError::Store(StoreError::Conflict { .. })) => {
                    tracing::info!("memory tool edit lost a race; reading the file again");
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Fail::Core(CoreError::Store(StoreError::Conflict {
            op: "memory_tool_edit",
        })))
    }

    async fn view(
        &self,
        call: &Call<'_>,
        r: Option<&MemoryRef>,
        raw: &str,
        range: Option<&[i64]>,
    ) -> Step<String> {
        let path = MemPath::parse(raw)?;
        if let (Some(r), false) = (r, path.is_root()) {
            if let Some(file) = self.file(r, &path).await? {
                return view_file(raw, &file.entry.content, range);
            }
        }
        let files = self.files(call).await?;
        let below: Vec<&Listed> = files.iter().filter(|f| f.path.is_below(&path)).collect();
        if !path.is_root() && below.is_empty() {
            return Err(Self::missing(raw));
        }
        Ok(directory_view(&path, &below))
    }

    async fn create(
        &self,
        call: &Call<'_>,
        r: Option<&MemoryRef>,
        raw: &str,
        text: &str,
    ) -> Step<String> {
        let path = MemPath::parse(raw)?;
        let Some(r) = r else {
            return Err(CoreError::RefNotAdmitted.into());
        };
        let exists = || Fail::Tool(format!("File {raw} already exists"));
        if path.is_root() {
            return Err(exists());
        }
        Self::check_size(raw, text)?;
        let files = self.files(call).await?;
        if files
            .iter()
            .any(|f| f.path == path || f.path.is_below(&path))
        {
            return Err(exists());
        }
        if let Some(a) = path
            .ancestors()
            .into_iter()
            .find(|a| files.iter().any(|f| &f.path == a))
        {
            return Err(Fail::Tool(format!(
                "Cannot create {raw}: {} is a file",
                a.as_str()
            )));
        }
        if files.len() >= MAX_FILES {
            return Err(Fail::Tool(format!(
                "Cannot create {raw}: /memories holds the maximum of {MAX_FILES} files; delete or merge some first"
            )));
        }
        let written = self
            .writer
            .put(&self.request(call, &path, text.to_owned()))
            .await?;
        let mine = written.written.first().map(|w| w.id.clone());
        // No store key names a path, so the put could not be conditional on it: a create that
        // raced another for the same path finds the other here and withdraws (both may
        // withdraw; a create that answered success is never undone).
        let at = self.at(r, &path).await?;
        if at.iter().any(|e| Some(&e.entry.id) != mine.as_ref()) {
            if let Some(id) = &mine {
                self.writer
                    .delete(call.scope.tenant().as_str(), call.memory_ref, id, None)
                    .await?;
            }
            return Err(exists());
        }
        Ok(format!("File created successfully at: {raw}"))
    }

    async fn str_replace(
        &self,
        call: &Call<'_>,
        r: Option<&MemoryRef>,
        raw: &str,
        old: &str,
        new: &str,
    ) -> Step<String> {
        let (before, _) = self
            .edit(call, r, raw, |content| {
                let lines = occurrence_lines(content, old);
                match lines.len() {
                    0 => Err(Fail::Tool(format!(
                        "No replacement was performed, old_str `{old}` did not appear verbatim in {raw}."
                    ))),
                    1 => Ok(content.replacen(old, new, 1)),
                    _ => Err(Fail::Tool(format!(
                        "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
                        lines.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
                    ))),
                }
            })
            .await?;
        let pos = before.find(old).unwrap_or(0);
        let changed = before[..pos].matches('\n').count();
        let stored = self.stored_form(&before.replacen(old, new, 1))?;
        let lines: Vec<&str> = stored.split('\n').collect();
        let from = changed.saturating_sub(2);
        let to = lines.len().min(changed + 3);
        let snippet: Vec<String> = (from..to).map(|i| numbered(i + 1, lines[i])).collect();
        Ok(format!(
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
            snippet.join("\n")
        ))
    }

    async fn insert(
        &self,
        call: &Call<'_>,
        r: Option<&MemoryRef>,
        raw: &str,
        line: i64,
        text: &str,
    ) -> Step<String> {
        self.edit(call, r, raw, |content| {
            let mut lines: Vec<&str> = content.split('\n').collect();
            if lines.last() == Some(&"") {
                lines.pop();
            }
            let at = usize::try_from(line).ok().filter(|at| *at <= lines.len());
            let Some(at) = at else {
                return Err(Fail::Tool(format!(
                    "Invalid `insert_line` parameter: {line}. It should be within the range [0, {}].",
                    lines.len()
                )));
            };
            lines.insert(at, text.trim_end_matches('\n'));
            let mut out = lines.join("\n");
            if !out.ends_with('\n') {
                out.push('\n');
            }
            Ok(out)
        })
        .await?;
        Ok(format!("The file {raw} has been edited."))
    }

    async fn delete(&self, call: &Call<'_>, r: Option<&MemoryRef>, raw: &str) -> Step<String> {
        let path = MemPath::parse(raw)?;
        if path.is_root() {
            return Err(Fail::Tool(
                "Cannot delete the /memories directory itself".to_owned(),
            ));
        }
        let gone = || Fail::Tool(format!("The path {raw} does not exist"));
        let Some(r) = r else {
            return Err(gone());
        };
        let mut targets = vec![path.clone()];
        if self.at(r, &path).await?.is_empty() {
            targets = self
                .files(call)
                .await?
                .into_iter()
                .filter(|f| f.path.is_below(&path))
                .map(|f| f.path)
                .collect();
            if targets.is_empty() {
                return Err(gone());
            }
        }
        for target in &targets {
            // An edit that lands between the read and the delete writes a new entry: read
            // again until the path holds nothing.
            for _ in 0..ATTEMPTS {
                let at = self.at(r, target).await?;
                if at.is_empty() {
                    break;
                }
                for e in at {
                    self.writer
                        .delete(
                            call.scope.tenant().as_str(),
                            call.memory_ref,
                            &e.entry.id,
                            None,
                        )
                        .await?;
                }
            }
        }
        Ok(format!("Successfully deleted {raw}"))
    }

    async fn rename(
        &self,
        call: &Call<'_>,
        r: Option<&MemoryRef>,
        old_raw: &str,
        new_raw: &str,
    ) -> Step<String> {
        let old = MemPath::parse(old_raw)?;
        let new = MemPath::parse(new_raw)?;
        if old.is_root() {
            return Err(Fail::Tool(
                "Cannot rename the /memories directory itself".to_owned(),
            ));
        }
        let Some(r) = r else {
            return Err(Fail::Tool(format!("The path {old_raw} does not exist")));
        };
        let files = self.files(call).await?;
        if new.is_root() || files.iter().any(|f| f.path == new || f.path.is_below(&new)) {
            return Err(Fail::Tool(format!(
                "The destination {new_raw} already exists"
            )));
        }
        if new == old || new.is_below(&old) {
            return Err(Fail::Tool(format!(
                "Cannot rename {old_raw} to {new_raw}: a directory cannot move into itself"
            )));
        }
        if let Some(a) = new
            .ancestors()
            .into_iter()
            .find(|a| files.iter().any(|f| &f.path == a))
        {
            return Err(Fail::Tool(format!(
                "Cannot rename to {new_raw}: {} is a file",
                a.as_str()
            )));
        }
        let sources: Vec<MemPath> = if files.iter().any(|f| f.path == old) {
            vec![old.clone()]
        } else {
            files
                .iter()
                .filter(|f| f.path.is_below(&old))
                .map(|f| f.path.clone())
                .collect()
        };
        if sources.is_empty() {
            return Err(Fail::Tool(format!("The path {old_raw} does not exist")));
        }
        for source in &sources {
            let target = source.moved(&old, &new)?;
            for attempt in 0..=ATTEMPTS {
                if attempt == ATTEMPTS {
                    return Err(Fail::Core(CoreError::Store(StoreError::Conflict {
                        op: "memory_tool_rename",
                    })));
                }
                // Deleted meanwhile: nothing left to move.
                let Some(file) = self.file(r, source).await? else {
                    break;
                };
                let request = self.request(call, &target, file.entry.content.clone());
                match self
                    .writer
                    .put_replacing(&request, std::slice::from_ref(&file))
                    .await
                {
                    Ok(_) => break,
                    Err(CoreError::Store(StoreError::Conflict { .. })) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(format!("Successfully renamed {old_raw} to {new_raw}"))
    }
}

fn numbered(n: usize, line: &str) -> String {
    format!("{n:>LINE_NUMBER_WIDTH$}\t{line}")
}

/// The 1-based lines of every occurrence of `needle`, overlapping ones included (as the
/// reference backend reports them).
fn occurrence_lines(content: &str, needle: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut start = 0;
    while start <= content.len() {
        let Some(found) = content[start..].find(needle) else {
            break;
        };
        let pos = start + found;
        lines.push(content[..pos].matches('\n').count() + 1);
        start = pos + content[pos..].chars().next().map_or(1, char::len_utf8);
    }
    lines
}

/// Python's slice bounds: negative counts from the end, everything clamped to the length.
fn py_index(i: i64, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if i < 0 {
        (len_i + i).max(0)
    } else {
        i.min(len_i)
    };
    usize::try_from(at).unwrap_or(0)
}

fn view_file(raw: &str, content: &str, range: Option<&[i64]>) -> Step<String> {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() > MAX_LINES {
        return Err(Fail::Tool(format!(
            "File {raw} exceeds maximum line limit of 999,999 lines."
        )));
    }
    let (start, end) = match range {
        Some([first, last]) => {
            let start = (*first).max(1) - 1;
            let end = if *last == -1 {
                i64::try_from(lines.len()).unwrap_or(i64::MAX)
            } else {
                *last
            };
            (py_index(start, lines.len()), py_index(end, lines.len()))
        }
        _ => (0, lines.len()),
    };
    let shown = lines.get(start..end.max(start)).unwrap_or(&[]);
    let numbered_lines: Vec<String> = shown
        .iter()
        .enumerate()
        .map(|(i, line)| numbered(i + start + 1, line))
        .collect();
    Ok(format!(
        "Here's the content of {raw} with line numbers:\n{}",
        numbered_lines.join("\n")
    ))
}

/// The reference backend's size notation (`_format_file_size`): 0B, 512B, 1.5K, 2M.
fn format_size(bytes: usize) -> String {
    if bytes == 0 {
        return "0B".to_owned();
    }
    const UNITS: [&str; 4] = ["B", "K", "M", "G"];
    let bits = usize::BITS - bytes.leading_zeros();
    let i = (((bits - 1) / 10) as usize).min(UNITS.len() - 1);
    let size = bytes as f64 / 1024f64.powi(i as i32);
    if size.fract() == 0.0 {
        format!("{}{}", size as u64, UNITS[i])
    } else {
        format!("{size:.1}{}", UNITS[i])
    }
}

/// A directory's view, two levels deep, hidden names (a leading `.`) left out, names sorted and
/// each directory followed by its own items, as the reference backend walks a directory. A
/// directory's size is the bytes of the files below it (there is no filesystem block size).
fn directory_view(dir: &MemPath, below: &[&Listed]) -> String {
    #[derive(Default)]
    struct Node {
        bytes: usize,
        file: bool,
        children: BTreeMap<String, Node>,
    }
    let mut root = Node::default();
    for f in below {
        let rel = &f.path.as_str()[dir.as_str().len() + 1..];
        let names: Vec<&str> = rel.split('/').collect();
        if names.iter().take(2).any(|n| n.starts_with('.')) {
            continue;
        }
        root.bytes += f.bytes;
        let mut node = &mut root;
        for (depth, name) in names.iter().enumerate().take(2) {
            node = node.children.entry((*name).to_owned()).or_default();
            node.bytes += f.bytes;
            node.file = depth + 1 == names.len();
        }
    }
    let mut lines = vec![format!("{}\t{}", format_size(root.bytes), dir.as_str())];
    for (name, node) in &root.children {
        let slash = if node.file { "" } else { "/" };
        lines.push(format!(
            "{}\t{}/{name}{slash}",
            format_size(node.bytes),
            dir.as_str()
        ));
        for (child, grand) in &node.children {
            let slash = if grand.file { "" } else { "/" };
            lines.push(format!(
                "{}\t{}/{name}/{child}{slash}",
                format_size(grand.bytes),
                dir.as_str()
            ));
        }
    }
    format!(
        "Here're the files and directories up to 2 levels deep in {}, excluding hidden items:\n{}",
        dir.as_str(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_lines_and_slices_follow_the_reference_backend() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(1024), "1K");
        assert_eq!(format_size(1536), "1.5K");
        assert_eq!(format_size(3 * 1024 * 1024), "3M");
        assert_eq!(numbered(7, "x"), "     7\tx");
        assert_eq!(occurrence_lines("aa\naa", "a"), vec![1, 1, 2, 2]);
        assert_eq!(occurrence_lines("aaa", "aa"), vec![1, 1]);
        assert_eq!(occurrence_lines("ab", ""), vec![1, 1, 1]);
        assert_eq!(py_index(-1, 5), 4);
        assert_eq!(py_index(9, 5), 5);
    }
}
