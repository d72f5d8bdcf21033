//! The memory tool's six commands (`view`, `create`, `str_replace`, `insert`, `delete`,
//! `rename`) over the entries of one memoryRef, with the result strings of the Anthropic SDK's
//! reference backend (`BetaLocalFilesystemMemoryTool`), so a model sees what it was trained on.
//!
//! A file is one entry: the content is the file's text, the tag `memory-tool:path:<path>` names
//! it and `memory-tool:file` marks it as a file (directories exist only as prefixes of paths).
//! CTI-1: a malformed or foreign memoryRef has no files (views are empty, other commands find
//! nothing), and a write to it is refused as the write contract refuses it. SR-1: every write
//! is a [`MemoryWriter`] call with the configured secrets, so what a later `view` shows is the
//! redacted text. Every write is conditional ([`MemoryWriter::put_replacing_with`] with the
//! path keys of [`PathStore`]): a file's path is one store item naming its entry, so a create
//! lands only on a free path, an edit only on the revision it read, a rename (of one file or a
//! whole directory) only if every source is unchanged and every destination free, all in one
//! all-or-nothing write; a call that loses re-reads and re-applies, so two racing edits never
//! lose one another and no two files ever share a path.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use memory_core::listing::{ListOptions, MAX_LIST_LIMIT};
use memory_core::model::{EntryKey, StoredEntry, SubjectKey};
use memory_core::paths::{PathChange, PathRecord, PathStore, PathWrite};
use memory_core::ports::{Clock, EntryStore, MAX_ITEMS_PER_TRANSACTION};
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
/// Entries read per lookup of one path by its tag (files from before path keys).
const LOOKUP_LIMIT: u32 = 16;
/// Files one rename moves: it is one transaction (four store items a file, more for files of
/// several data subjects), and DynamoDB's holds at most 100.
pub const MAX_RENAME_FILES: usize = 24;

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

/// A call with its memoryRef admitted once: `r` is `None` for a malformed or foreign ref
/// (CTI-1), which has no files.
#[derive(Clone, Copy)]
struct Admitted<'a> {
    call: &'a Call<'a>,
    r: Option<&'a MemoryRef>,
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
    paths: Arc<dyn PathStore>,
    clock: Arc<dyn Clock>,
    secrets: Vec<SecretInput>,
}

/// What a path key holds, as one lookup found it.
enum Slot {
    /// No file: `Some` is a record left pointing at an entry that is gone (deleted by id or by
    /// forget), which the next write at the path takes over.
    Free(Option<PathRecord>),
    File(Box<File>),
    /// Another path, differing only in case, holds the key.
    Alias(String),
}

/// A file: its entry and the path record naming it (`None` for a file written before path
/// keys existed, found by its path tag; its first rewrite claims the key).
struct File {
    path: MemPath,
    record: Option<PathRecord>,
    entry: StoredEntry,
}

impl File {
    /// The condition a rewrite of this file puts on its path key.
    fn expect(&self) -> Option<String> {
        self.record.as_ref().map(|r| r.entry_id.clone())
    }

    /// The subjects whose links exist now.
    fn linked(&self) -> BTreeSet<SubjectKey> {
        self.record
            .as_ref()
            .map(|r| r.subjects.clone())
            .unwrap_or_default()
    }

    /// Every subject whose words are in the file (a file from before path keys names one).
    fn contributors(&self) -> BTreeSet<SubjectKey> {
        let mut all = self.linked();
        all.extend(self.entry.subject.clone());
        all
    }
}

/// A path write whose new record names an entry of the write: `.1` is its index there.
type Planned = (PathWrite, Option<usize>);

impl MemoryTool {
    /// `secrets` are the server's configured SR-1 secrets, applied to every write; `paths`
    /// holds the path keys that make one path one file.
    pub fn new(
        writer: MemoryWriter,
        store: Arc<dyn EntryStore>,
        paths: Arc<dyn PathStore>,
        clock: Arc<dyn Clock>,
        secrets: Vec<SecretInput>,
    ) -> Self {
        MemoryTool {
            writer: writer.allowing_empty_content(),
            reader: MemoryReader::new(store.clone(), clock.clone()),
            store,
            paths,
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
        let at = Admitted {
            call,
            r: memory_ref.as_ref(),
        };
        let outcome = match self.refused(command) {
            Some(message) => Err(Fail::Tool(message)),
            None => self.dispatch(at, command).await,
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

    async fn dispatch(&self, at: Admitted<'_>, command: &Command) -> Step<String> {
        match command {
            Command::View { path, view_range } => self.view(at, path, view_range.as_deref()).await,
            Command::Create { path, file_text } => self.create(at, path, file_text).await,
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => self.str_replace(at, path, old_str, new_str).await,
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => self.insert(at, path, *insert_line, insert_text).await,
            Command::Delete { path } => self.delete(at, path).await,
            Command::Rename { old_path, new_path } => self.rename(at, old_path, new_path).await,
        }
    }

    /// What is refused before any work: a path naming a configured secret (it would be
    /// stored redacted, under another name than the one asked for; the answer does not repeat
    /// it), and texts no file can hold (bounded here, before any search or store call).
    fn refused(&self, command: &Command) -> Option<String> {
        let paths: Vec<&str> = match command {
            Command::View { path, .. }
            | Command::Create { path, .. }
            | Command::StrReplace { path, .. }
            | Command::Insert { path, .. }
            | Command::Delete { path } => vec![path],
            Command::Rename { old_path, new_path } => vec![old_path, new_path],
        };
        let redactor = match registry_from(&self.secrets) {
            Ok(registry) => registry.redactor(),
            Err(e) => return Some(format!("Error: {e}")),
        };
        if paths.iter().any(|p| redactor.redact_counting(p).1 > 0) {
            return Some(
                "Error: the path contains a configured secret value, so no file can have it \
                 (the path is not repeated here); choose a path without it."
                    .to_owned(),
            );
        }
        let too_long = |what: &str| {
            Some(format!(
                "Error: {what} is longer than the largest file ({MAX_FILE_BYTES} bytes); nothing was changed."
            ))
        };
        match command {
            Command::StrReplace { old_str, .. } if old_str.len() > MAX_FILE_BYTES => {
                too_long("old_str")
            }
            Command::StrReplace { new_str, .. } if new_str.len() > MAX_FILE_BYTES => {
                too_long("new_str")
            }
            Command::Insert { insert_text, .. } if insert_text.len() > MAX_FILE_BYTES => {
                too_long("insert_text")
            }
            _ => None,
        }
    }

    /// The live entries tagged with `path`, oldest id first: how a file written before path
    /// keys existed is found (a file with a path record is found through it).
    ///
    /// A rewrite puts the new entry's posting before its transaction and removes the old one's
    /// after, so a path with a live file always has a posting; but the postings and the entries
    /// are two reads, and a rewrite can land between them. Postings that name only vanished
    /// entries are therefore read again; no postings at all means no file.
    async fn tagged(&self, r: &MemoryRef, path: &MemPath) -> Result<Vec<StoredEntry>, CoreError> {
        let tag = path.tag();
        for _ in 0..ATTEMPTS {
            let ids = self.store.tag_postings(r, &tag, None, LOOKUP_LIMIT).await?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let keys = EntryKey::all_in(r, ids);
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

    /// What holds `path`: its path record and the entry it names (one key read, one entry
    /// read), or, without a record, a file from before path keys.
    async fn lookup(&self, r: &MemoryRef, path: &MemPath) -> Result<Slot, CoreError> {
        let mut record = self.paths.path(r, &path.key()).await?;
        // The record and its entry are two reads: a rewrite landing between them replaces the
        // entry the record named. A missing entry is a free path only if the record still names
        // it when read again; otherwise read the newer record.
        for _ in 0..ATTEMPTS {
            let Some(held) = record else {
                break;
            };
            let key = EntryKey {
                memory_ref: r.clone(),
                id: held.entry_id.clone(),
            };
            let now = self.clock.now();
            let entry = self
                .store
                .get(&key)
                .await?
                .filter(|e| &e.memory_ref == r && e.entry.is_live_at(now));
            match entry {
                Some(entry) if held.path == path.as_str() => {
                    return Ok(Slot::File(Box::new(File {
                        path: path.clone(),
                        record: Some(held),
                        entry,
                    })))
                }
                Some(_) => return Ok(Slot::Alias(held.path)),
                None => {
                    let again = self.paths.path(r, &path.key()).await?;
                    if again.as_ref() == Some(&held) {
                        return Ok(Slot::Free(Some(held)));
                    }
                    record = again;
                }
            }
        }
        if record.is_some() {
            // Still moving after every try: report the path as busy, as a lost edit is.
            tracing::info!("memory tool path record kept changing while read");
            return Err(busy("memory_tool_lookup"));
        }
        Ok(match self.tagged(r, path).await?.into_iter().next() {
            Some(entry) => Slot::File(Box::new(File {
                path: path.clone(),
                record: None,
                entry,
            })),
            None => Slot::Free(None),
        })
    }

    async fn file(&self, r: &MemoryRef, path: &MemPath) -> Result<Option<File>, CoreError> {
        Ok(match self.lookup(r, path).await? {
            Slot::File(f) => Some(*f),
            _ => None,
        })
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

    fn entry_input(call: &Call<'_>, path: &MemPath, content: String) -> EntryInput {
        EntryInput {
            content,
            tags: vec![FILE_TAG.to_owned(), path.tag()],
            expires_at: None,
            subject: call.subject.map(str::to_owned),
            tier: None,
        }
    }

    fn request(&self, call: &Call<'_>, entries: Vec<EntryInput>) -> PutRequest {
        PutRequest {
            tenant_id: call.scope.tenant().as_str().to_owned(),
            run_id: None,
            memory_ref: call.memory_ref.to_owned(),
            entries,
            secrets: self.secrets.clone(),
            attribution: Default::default(),
            idempotency_key: None,
        }
    }

    /// The subject of this call, as the store keys it.
    fn writer_subject(call: &Call<'_>) -> Option<SubjectKey> {
        call.subject
            .map(|s| SubjectKey::derive(call.scope.tenant(), s))
    }

    /// Writes `entries` in place of `replaces` and applies `plan` to the path keys, in one
    /// all-or-nothing store write through the SR-1 writer. `Conflict` when another call
    /// changed a file or a path key since it was read; then nothing changed.
    async fn write(
        &self,
        call: &Call<'_>,
        r: &MemoryRef,
        entries: Vec<EntryInput>,
        replaces: &[StoredEntry],
        plan: Vec<Planned>,
    ) -> Result<(), CoreError> {
        let request = self.request(call, entries);
        let paths = self.paths.clone();
        self.writer
            .put_replacing_with(&request, replaces, |stored| async move {
                let mut writes = Vec::with_capacity(plan.len());
                for (mut write, index) in plan {
                    if let (Some(record), Some(i)) = (write.then.as_mut(), index) {
                        let Some(e) = stored.get(i) else {
                            return Err(StoreError::Conflict { op: "memory_tool" });
                        };
                        record.entry_id = e.entry.id.clone();
                    }
                    writes.push(write);
                }
                let change = PathChange {
                    put: stored,
                    delete: replaces.to_vec(),
                    paths: writes,
                };
                paths.change_paths(r, &change).await
            })
            .await
            .map(drop)
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

    fn alias(raw: &str, other: &str) -> Fail {
        Fail::Tool(format!(
            "Cannot use {raw}: {other} exists, and the two differ only in case (one file on a \
             case-insensitive filesystem). Use {other}, or another name."
        ))
    }

    /// A path (or a directory of it) that differs only in case from an existing file's path or
    /// directory: refused, since a case-insensitive mirror would merge them. The path key makes
    /// the file-to-file case race-free; directories are checked against the listing.
    fn case_alias(path: &MemPath, files: &[Listed], except: Option<&MemPath>) -> Option<String> {
        let mut mine = path.ancestors();
        mine.push(path.clone());
        for f in files {
            if except.is_some_and(|e| f.path == *e || f.path.is_below(e)) {
                continue;
            }
            let mut theirs = f.path.ancestors();
            theirs.push(f.path.clone());
            for a in &mine {
                if let Some(t) = theirs.iter().find(|t| t.aliases(a)) {
                    return Some(t.as_str().to_owned());
                }
            }
        }
        None
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
        Admitted { call, r }: Admitted<'_>,
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
            let new_text = apply(&file.entry.entry.content)?;
            Self::check_size(raw, &new_text)?;
            let mut subjects = file.contributors();
            subjects.extend(Self::writer_subject(call));
            let plan = vec![claim(&path, file.record.as_ref(), subjects, 0)];
            let entries = vec![Self::entry_input(call, &path, new_text.clone())];
            let replaces = std::slice::from_ref(&file.entry);
            if landed(self.write(call, r, entries, replaces, plan).await)? {
                return Ok((file.entry.entry.content, new_text));
            }
            tracing::info!("memory tool edit lost a race; reading the file again");
        }
        Err(busy("memory_tool_edit").into())
    }

    async fn view(
        &self,
        Admitted { call, r }: Admitted<'_>,
        raw: &str,
        range: Option<&[i64]>,
    ) -> Step<String> {
        let path = MemPath::parse(raw)?;
        if let (Some(r), false) = (r, path.is_root()) {
            if let Some(file) = self.file(r, &path).await? {
                return view_file(raw, &file.entry.entry.content, range);
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
        Admitted { call, r }: Admitted<'_>,
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
        if taken(&path, &files) {
            return Err(exists());
        }
        if let Some(a) = file_above(&path, &files) {
            return Err(Fail::Tool(format!(
                "Cannot create {raw}: {} is a file",
                a.as_str()
            )));
        }
        if let Some(other) = Self::case_alias(&path, &files, None) {
            return Err(Self::alias(raw, &other));
        }
        if files.len() >= MAX_FILES {
            return Err(Fail::Tool(format!(
                "Cannot create {raw}: /memories holds the maximum of {MAX_FILES} files; delete or merge some first"
            )));
        }
        for _ in 0..ATTEMPTS {
            let taken_over = match self.lookup(r, &path).await? {
                Slot::File(_) => return Err(exists()),
                Slot::Alias(other) => return Err(Self::alias(raw, &other)),
                Slot::Free(record) => record,
            };
            let subjects = Self::writer_subject(call).into_iter().collect();
            let plan = vec![claim(&path, taken_over.as_ref(), subjects, 0)];
            let entries = vec![Self::entry_input(call, &path, text.to_owned())];
            if landed(self.write(call, r, entries, &[], plan).await)? {
                return Ok(format!("File created successfully at: {raw}"));
            }
            // Another call claimed the path key first: look again (it is a file now).
        }
        Err(busy("memory_tool_create").into())
    }

    async fn str_replace(&self, at: Admitted<'_>, raw: &str, old: &str, new: &str) -> Step<String> {
        let quoted = self.stored_form(old)?;
        let (before, _) = self
            .edit(at, raw, |content| {
                if old.len() > content.len() {
                    return Err(Fail::Tool(format!(
                        "No replacement was performed, old_str `{quoted}` did not appear verbatim in {raw}."
                    )));
                }
                let lines = occurrence_lines(content, old);
                match lines.len() {
                    0 => Err(Fail::Tool(format!(
                        "No replacement was performed, old_str `{quoted}` did not appear verbatim in {raw}."
                    ))),
                    1 => Ok(content.replacen(old, new, 1)),
                    _ => Err(Fail::Tool(format!(
                        "No replacement was performed. Multiple occurrences of old_str `{quoted}` in lines: {}. Please ensure it is unique",
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

    async fn insert(&self, at: Admitted<'_>, raw: &str, line: i64, text: &str) -> Step<String> {
        self.edit(at, raw, |content| {
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

    /// Removes the file at `path` (and, for a file from before path keys, any duplicate a
    /// create race left), one conditional write per file. `Ok(false)` when nothing was there.
    async fn remove(&self, r: &MemoryRef, path: &MemPath) -> Result<bool, CoreError> {
        let mut removed = false;
        for _ in 0..ATTEMPTS * 2 {
            let (entries, record) = match self.lookup(r, path).await? {
                Slot::File(f) => (vec![f.entry], f.record),
                // A record of an entry deleted elsewhere: released, so no name is left behind.
                Slot::Free(Some(record)) => (Vec::new(), Some(record)),
                Slot::Free(None) | Slot::Alias(_) => return Ok(removed),
            };
            let change = PathChange {
                put: Vec::new(),
                delete: entries.clone(),
                paths: match &record {
                    Some(record) => vec![PathWrite {
                        key: path.key(),
                        expect: Some(record.entry_id.clone()),
                        read_subjects: record.subjects.clone(),
                        then: None,
                    }],
                    None => Vec::new(),
                },
            };
            match self.paths.change_paths(r, &change).await {
                Ok(()) => removed |= !entries.is_empty(),
                Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(removed)
    }

    async fn delete(&self, Admitted { call, r }: Admitted<'_>, raw: &str) -> Step<String> {
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
        if self.remove(r, &path).await? {
            return Ok(format!("Successfully deleted {raw}"));
        }
        let below: Vec<MemPath> = self
            .files(call)
            .await?
            .into_iter()
            .filter(|f| f.path.is_below(&path))
            .map(|f| f.path)
            .collect();
        if below.is_empty() {
            return Err(gone());
        }
        for target in &below {
            self.remove(r, target).await?;
        }
        Ok(format!("Successfully deleted {raw}"))
    }

    async fn rename(
        &self,
        Admitted { call, r }: Admitted<'_>,
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
        let dest_exists = || Fail::Tool(format!("The destination {new_raw} already exists"));
        for _ in 0..ATTEMPTS {
            let files = self.files(call).await?;
            if new.is_root() || taken(&new, &files) {
                return Err(dest_exists());
            }
            if new == old || new.is_below(&old) {
                return Err(Fail::Tool(format!(
                    "Cannot rename {old_raw} to {new_raw}: a directory cannot move into itself"
                )));
            }
            if let Some(a) = file_above(&new, &files) {
                return Err(Fail::Tool(format!(
                    "Cannot rename to {new_raw}: {} is a file",
                    a.as_str()
                )));
            }
            if let Some(other) = Self::case_alias(&new, &files, Some(&old)) {
                return Err(Self::alias(new_raw, &other));
            }
            let mut sources: Vec<File> = Vec::new();
            if let Some(f) = self.file(r, &old).await? {
                sources.push(f);
            } else {
                let below: Vec<&Listed> = files.iter().filter(|f| f.path.is_below(&old)).collect();
                if below.len() > MAX_RENAME_FILES {
                    return Err(Self::too_many(old_raw, below.len()));
                }
                for listed in below {
                    sources.extend(self.file(r, &listed.path).await?);
                }
            }
            if sources.is_empty() {
                return Err(Fail::Tool(format!("The path {old_raw} does not exist")));
            }
            if sources.len() > MAX_RENAME_FILES {
                return Err(Self::too_many(old_raw, sources.len()));
            }
            let mut writes: BTreeMap<String, Planned> = BTreeMap::new();
            for s in &sources {
                writes.insert(
                    s.path.key(),
                    (
                        PathWrite {
                            key: s.path.key(),
                            expect: s.expect(),
                            read_subjects: s.linked(),
                            then: None,
                        },
                        None,
                    ),
                );
            }
            let mut entries = Vec::with_capacity(sources.len());
            for (i, s) in sources.iter().enumerate() {
                let target = s.path.moved(&old, &new)?;
                let mut subjects = s.contributors();
                subjects.extend(Self::writer_subject(call));
                match writes.get_mut(&target.key()) {
                    // A change of case only: the same key moves from the old name to the new.
                    Some(slot) => {
                        *slot = (
                            PathWrite {
                                then: Some(record(&target, subjects)),
                                ..slot.0.clone()
                            },
                            Some(i),
                        )
                    }
                    None => {
                        let taken_over = match self.lookup(r, &target).await? {
                            Slot::File(_) => return Err(dest_exists()),
                            Slot::Alias(other) => return Err(Self::alias(new_raw, &other)),
                            Slot::Free(record) => record,
                        };
                        writes.insert(
                            target.key(),
                            claim(&target, taken_over.as_ref(), subjects, i),
                        );
                    }
                }
                entries.push(Self::entry_input(
                    call,
                    &target,
                    s.entry.entry.content.clone(),
                ));
            }
            let plan: Vec<Planned> = writes.into_values().collect();
            let items = sources.len() * 2 + plan.iter().map(|(w, _)| w.items()).sum::<usize>();
            if items > MAX_ITEMS_PER_TRANSACTION {
                return Err(Fail::Tool(format!(
                    "Cannot rename {old_raw}: moving its {} files at once needs {items} store \
                     writes (files written under several data subjects need more), and a \
                     rename is all-or-nothing within {MAX_ITEMS_PER_TRANSACTION}; rename its \
                     subdirectories one at a time.",
                    sources.len()
                )));
            }
            let replaces: Vec<StoredEntry> = sources.into_iter().map(|s| s.entry).collect();
            if landed(self.write(call, r, entries, &replaces, plan).await)? {
                return Ok(format!("Successfully renamed {old_raw} to {new_raw}"));
            }
            tracing::info!("memory tool rename lost a race; reading the files again");
        }
        Err(busy("memory_tool_rename").into())
    }

    fn too_many(raw: &str, files: usize) -> Fail {
        Fail::Tool(format!(
            "Cannot rename {raw}: it holds {files} files, and a rename moves at most \
             {MAX_RENAME_FILES} files in one all-or-nothing step; rename its subdirectories \
             one at a time."
        ))
    }
}

/// Whether a file or a directory of `files` is at `path`.
fn taken(path: &MemPath, files: &[Listed]) -> bool {
    files
        .iter()
        .any(|f| f.path == *path || f.path.is_below(path))
}

/// The directory of `path` that is a file of `files`: a file cannot be put below it.
fn file_above(path: &MemPath, files: &[Listed]) -> Option<MemPath> {
    path.ancestors()
        .into_iter()
        .find(|a| files.iter().any(|f| &f.path == a))
}

/// The record of the file a write is about to store at `path` (`write` fills in its entry id).
fn record(path: &MemPath, subjects: BTreeSet<SubjectKey>) -> PathRecord {
    PathRecord {
        path: path.as_str().to_owned(),
        entry_id: String::new(),
        subjects,
    }
}

/// The change of `path`'s key from `held` (its record as read; `None`: none) to the record of
/// entry `index` of the write, linked to `subjects`.
fn claim(
    path: &MemPath,
    held: Option<&PathRecord>,
    subjects: BTreeSet<SubjectKey>,
    index: usize,
) -> Planned {
    (
        PathWrite {
            key: path.key(),
            expect: held.map(|h| h.entry_id.clone()),
            read_subjects: held.map(|h| h.subjects.clone()).unwrap_or_default(),
            then: Some(record(path, subjects)),
        },
        Some(index),
    )
}

/// Whether a [`MemoryTool::write`] landed: `false` when it lost a race (nothing changed; read
/// again and retry), its failure otherwise.
fn landed(written: Result<(), CoreError>) -> Result<bool, CoreError> {
    match written {
        Ok(()) => Ok(true),
        Err(CoreError::Store(StoreError::Conflict { .. })) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The failure of a step that lost every attempt to another call changing the same path keys
/// or files: nothing changed, and the caller may retry.
fn busy(op: &'static str) -> CoreError {
    CoreError::Store(StoreError::Conflict { op })
}

fn numbered(n: usize, line: &str) -> String {
    format!("{n:>LINE_NUMBER_WIDTH$}\t{line}")
}

/// The 1-based lines of every occurrence of `needle`, overlapping ones included (as the
/// reference backend reports them).
///
/// Linear in the file: lines are counted from the previous occurrence on, never from the start
/// (counting from the start made `"\n"` in a file of 65,535 lines quadratic: seconds, not
/// milliseconds).
fn occurrence_lines(content: &str, needle: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut start = 0;
    let (mut line, mut counted) = (1, 0);
    while start <= content.len() {
        let Some(found) = content.get(start..).and_then(|rest| rest.find(needle)) else {
            break;
        };
        let pos = start + found;
        line += content[counted..pos]
            .bytes()
            .filter(|b| *b == b'\n')
            .count();
        counted = pos;
        lines.push(line);
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
