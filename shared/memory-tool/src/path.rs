//! The path grammar of the memory tool: every path lies under `/memories` (the tool's one root,
//! as Anthropic's memory tool documentation requires of a backend), and nothing a path says can
//! reach outside it. There is no filesystem behind the paths, but an application may mirror them
//! into one, so the grammar is stricter than "resolves inside the root": `.` and `..` segments,
//! empty segments, percent signs (encoded variants such as `%2e%2e`), backslashes, control and
//! non-ASCII characters are refused outright rather than interpreted. Names a Windows or
//! case-insensitive mirror would alias or refuse are refused too: device names (`CON`, `NUL.txt`,
//! `com1`), names ending in a dot, and (through the path key, [`MemPath::key`]) a path whose
//! case-folded form is another existing path's.

/// The root every path lies under.
pub const ROOT: &str = "/memories";

/// The tag that names a file's path (`memory-tool:path:/memories/notes.md`).
pub const PATH_TAG_PREFIX: &str = "memory-tool:path:";

/// The longest path: its tag must fit the 128-byte bound every tag has.
pub const MAX_PATH_BYTES: usize = memory_core::writer::MAX_TAG_BYTES - PATH_TAG_PREFIX.len();

/// A validated path: `/memories` itself or `/memories/seg/...`, without a trailing slash.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemPath(String);

impl MemPath {
    /// The path, or the tool error the model is shown. A single trailing slash is accepted
    /// (`/memories/dir/` names the directory).
    pub fn parse(raw: &str) -> Result<MemPath, String> {
        let Some(rest) = raw.strip_prefix(ROOT) else {
            return Err(format!("Path must start with /memories, got: {raw}"));
        };
        if raw.len() > MAX_PATH_BYTES {
            return Err(format!(
                "Path {raw} is too long: a path has at most {MAX_PATH_BYTES} bytes"
            ));
        }
        if rest.is_empty() || rest == "/" {
            return Ok(MemPath(ROOT.to_owned()));
        }
        let Some(rest) = rest.strip_prefix('/') else {
            return Err(format!("Path must start with /memories, got: {raw}"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        for segment in rest.split('/') {
            if segment == "." || segment == ".." {
                return Err(format!("Path {raw} would escape /memories directory"));
            }
            let allowed = !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !allowed {
                return Err(format!(
                    "Path {raw} is not allowed: each name under /memories is 1 or more of \
                     A-Z a-z 0-9 . _ - (no empty names, percent signs, backslashes or spaces)"
                ));
            }
            if segment.ends_with('.') || is_device_name(segment) {
                return Err(format!(
                    "Path {raw} is not allowed: {segment} cannot be a file or directory name on \
                     Windows (device names such as CON, NUL or COM1, with or without an \
                     extension, and names ending in a dot are refused)"
                ));
            }
        }
        Ok(MemPath(format!("{ROOT}/{rest}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path key: the path case-folded (paths are ASCII), so `X.md` and `x.md` claim one
    /// store item and cannot both exist, as on a case-insensitive mirror.
    pub fn key(&self) -> String {
        self.0.to_ascii_lowercase()
    }

    /// Whether two paths name the same thing on a case-insensitive mirror but differ here.
    pub fn aliases(&self, other: &MemPath) -> bool {
        self.0 != other.0 && self.0.eq_ignore_ascii_case(&other.0)
    }

    pub fn is_root(&self) -> bool {
        self.0 == ROOT
    }

    /// The tag a file at this path carries.
    pub fn tag(&self) -> String {
        format!("{PATH_TAG_PREFIX}{}", self.0)
    }

    /// The path a stored tag names, if it is a well-formed path tag.
    pub fn from_tag(tag: &str) -> Option<MemPath> {
        let raw = tag.strip_prefix(PATH_TAG_PREFIX)?;
        MemPath::parse(raw).ok().filter(|p| p.as_str() == raw)
    }

    /// Whether `self` lies strictly below `dir`.
    pub fn is_below(&self, dir: &MemPath) -> bool {
        self.0.len() > dir.0.len()
            && self.0.starts_with(dir.0.as_str())
            && self.0.as_bytes()[dir.0.len()] == b'/'
    }

    /// `self` moved from below `from` to below `to` (`from` must be an ancestor or `self`).
    pub fn moved(&self, from: &MemPath, to: &MemPath) -> Result<MemPath, String> {
        let suffix = &self.0[from.0.len()..];
        MemPath::parse(&format!("{}{suffix}", to.0))
    }

    /// The ancestors strictly between the root and `self`, nearest the root first.
    pub fn ancestors(&self) -> Vec<MemPath> {
        let mut out = Vec::new();
        let mut at = ROOT.len() + 1;
        while let Some(slash) = self.0.get(at..).and_then(|s| s.find('/')) {
            out.push(MemPath(self.0[..at + slash].to_owned()));
            at += slash + 1;
        }
        out
    }
}

/// Windows device names, which name a device in every directory whatever the extension.
fn is_device_name(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or(segment);
    let upper = stem.to_ascii_uppercase();
    matches!(upper.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || (upper.len() == 4
            && (upper.starts_with("COM") || upper.starts_with("LPT"))
            && upper.as_bytes()[3].is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_the_root() {
        for ok in [
            "/memories",
            "/memories/",
            "/memories/notes.md",
            "/memories/a/b/c.txt",
            "/memories/dir/",
            "/memories/.hidden",
            "/memories/console.md",
            "/memories/com10",
            "/memories/nul_x",
            "/memories/a.b.c",
        ] {
            assert!(MemPath::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "/memories/../x",
            "/memories/a/../../x",
            "/memories/./x",
            "/memories/%2e%2e/x",
            "/memories/%2E%2E%2Fx",
            "/memories/..%2fx",
            "/memories/a\\..\\x",
            "/memories//x",
            "/memories/a b",
            "/memories/\u{0}x",
            "/memories/\u{ff0e}\u{ff0e}/x",
            "/memoriesx",
            "/etc/passwd",
            "memories/x",
            "",
            "../memories/x",
            "/memories/CON",
            "/memories/con.md",
            "/memories/NUL.txt",
            "/memories/a/Com1",
            "/memories/lpt9.log/x",
            "/memories/aux",
            "/memories/notes.",
            "/memories/dir./x",
            "/memories/a...",
        ] {
            assert!(MemPath::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("/memories/{}", "a".repeat(MAX_PATH_BYTES));
        assert!(MemPath::parse(&long).is_err());
    }

    #[test]
    fn tags_ancestors_and_moves() {
        let p = MemPath::parse("/memories/a/b/c.md").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.tag(), "memory-tool:path:/memories/a/b/c.md");
        assert!(p.tag().len() <= memory_core::writer::MAX_TAG_BYTES);
        assert_eq!(MemPath::from_tag(&p.tag()), Some(p.clone()));
        assert_eq!(MemPath::from_tag("memory-tool:path:/memories/../x"), None);
        let names: Vec<String> = p.ancestors().iter().map(|a| a.0.clone()).collect();
        assert_eq!(names, ["/memories/a", "/memories/a/b"]);
        let a = MemPath::parse("/memories/a").unwrap_or_else(|e| panic!("{e}"));
        let ab = MemPath::parse("/memories/ab").unwrap_or_else(|e| panic!("{e}"));
        assert!(p.is_below(&a) && !ab.is_below(&a) && !a.is_below(&a));
        let z = MemPath::parse("/memories/z").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.moved(&a, &z).map(|m| m.0),
            Ok("/memories/z/b/c.md".into())
        );
    }
}
