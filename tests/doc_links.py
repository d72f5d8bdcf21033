#!/usr/bin/env python3
"""The documentation link check, offline and on the standard library alone.

- Every relative link in `README.md`, `CHANGELOG.md` and `docs/**/*.md` (and in the other
  Markdown files of the repository) resolves to a file or folder that exists, and a `#anchor` on
  it to a heading of that file, by GitHub's anchor rules (lower case, punctuation other than `-`
  and `_` dropped, spaces to `-`, `-1`, `-2`... for repeated headings).
- Every in-code reference to a page, `docs/<page>.md`, `docs/<page>.md "<Heading>"` or
  `docs/<page>.md#anchor` (likewise a path to any other Markdown file of the repository), in
  the source files (`.rs`, `.py`, `.sh`, `.toml`, `.yaml`, `.yml` and extensionless scripts)
  names a file that exists and a heading it holds. A reference may wrap onto the next comment
  line.
- Every specification file a source file names (`openwop-*.md`, `openintent-*.md`, `oap-*.md`)
  exists under `docs/spec/`, and nothing points at a specification outside the repository.
- No source comment or docstring cites a README section (`README §...`, `README "..."`,
  `README.md#...`), and no Markdown page but the CHANGELOG does so in prose: those headings
  moved to the pages under `docs/`.

Problems are printed as `path:line: what`, and the exit status is 1 when there are any.
`--self-test` plants a broken link, a broken anchor, a reference to a missing heading, a stale
README reference and a missing specification file in a temporary tree and requires each to be
reported (and the sound ones not to be).

    python3 tests/doc_links.py [--self-test] [--root DIR]
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tempfile
import tokenize
import unicodedata
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
SELF = Path("tests/doc_links.py")

SKIP_DIRS = {".git", "target", ".venv", ".venv-build", "node_modules", ".pytest_cache", ".local",
             "__pycache__"}
SOURCE_SUFFIXES = {".rs", ".py", ".sh", ".toml", ".yaml", ".yml"}
HASH_COMMENT_SUFFIXES = {".sh", ".toml", ".yaml", ".yml"}

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
HTML_ANCHOR = re.compile(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

# A reference to a Markdown file of the repository from code: the path, then an optional
# `#anchor` or ` "Heading"` (the heading may run onto the next comment line).
MD_REF = re.compile(
    r"(?<![\w./-])((?:docs|infra|tests|shared|functions)/[\w./-]*?[\w-]\.md)"
    r"(?:#([\w-]+)|[ \t]+\"([^\"\n]*)(\"?))?")
SPEC_NAME = re.compile(r"(?<![\w./-])((?:openwop|openintent|oap)-[\w-]+\.md)\b")
SPEC_OUTSIDE = re.compile(r"(?:\.\./shared/spec|(?<![\w-])shared/spec/|/work/shared)")
STALE_README = re.compile(r"(?<![/\w-])README(?:\.md)?(?:'s)?[ \t]*(?:§|\"|#)")
# The same in prose: a link to a README heading is checked as a link instead.
STALE_README_PROSE = re.compile(r"(?<![/\w\[-])README(?:'s)?[ \t]*(?:§|\")")


# --------------------------------------------------------------------------------------------
# Markdown: headings, anchors, links


def github_anchor(text: str) -> str:
    """The anchor GitHub gives a heading whose rendered text is `text`."""
    out = []
    for ch in text.strip().lower():
        if ch in " -_" or unicodedata.category(ch)[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def rendered(heading: str) -> str:
    """A heading's text as rendered: code spans keep their content, links their text, emphasis
    markers go."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("**", "").replace("__", "")


def markdown_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None:
            yield number, line


def headings(text: str) -> tuple[set[str], set[str]]:
    """The anchors of a Markdown text, and its headings as rendered text (for `"Heading"`
    references)."""
    anchors: set[str] = set()
    titles: set[str] = set()
    seen: dict[str, int] = {}

    def add(title: str) -> None:
        title = rendered(title).strip()
        titles.add(title)
        base = github_anchor(title)
        n = seen.get(base, 0)
        anchors.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1

    previous = None
    for _, line in markdown_lines(text):
        m = ATX.match(line)
        if m:
            add(m.group(2))
        elif previous and previous.strip() and SETEXT.match(line) and not previous.lstrip().startswith(("-", "*", "|", ">")):
            add(previous)
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
        previous = line
    return anchors, titles


class Docs:
    """Headings of the repository's Markdown files, read once each."""

    def __init__(self, root: Path):
        self.root = root
        self.cache: dict[Path, tuple[set[str], set[str]]] = {}

    def of(self, path: Path) -> tuple[set[str], set[str]]:
        path = path.resolve()
        if path not in self.cache:
            self.cache[path] = headings(path.read_text(encoding="utf-8"))
        return self.cache[path]


def walk(root: Path):
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in SKIP_DIRS for part in rel.parts[:-1]) or rel.parts[0] in SKIP_DIRS:
            continue
        if path.is_file():
            yield path


def markdown_files(root: Path) -> list[Path]:
    return [p for p in walk(root) if p.suffix == ".md"]


def check_markdown(root: Path, docs: Docs, path: Path) -> list[str]:
    problems = []
    rel = path.relative_to(root)
    for number, line in markdown_lines(path.read_text(encoding="utf-8")):
        bare = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        if rel.as_posix() != "CHANGELOG.md" and STALE_README_PROSE.search(bare):
            problems.append(f"{rel}:{number}: cites a README section; link the docs/ page instead")
        targets = [m.group(1) for m in INLINE_LINK.finditer(bare)]
        m = REF_DEF.match(bare)
        if m:
            targets.append(m.group(1))
        for target in targets:
            target = target.strip("<>")
            if SCHEME.match(target) or target.startswith("//"):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / unquote(file_part)).resolve() if file_part else path.resolve()
            try:
                dest.relative_to(root.resolve())
            except ValueError:
                problems.append(f"{rel}:{number}: link {target!r} leaves the repository")
                continue
            if not dest.exists():
                problems.append(f"{rel}:{number}: link {target!r}: no such file")
                continue
            if anchor:
                if dest.is_dir() or dest.suffix != ".md":
                    problems.append(f"{rel}:{number}: link {target!r}: an anchor on a file that is not Markdown")
                elif unquote(anchor) not in docs.of(dest)[0]:
                    problems.append(f"{rel}:{number}: link {target!r}: no heading with anchor #{anchor} in {dest.relative_to(root.resolve())}")
    return problems


# --------------------------------------------------------------------------------------------
# Source files: comments, references


def is_script(path: Path) -> str | None:
    """'sh' or 'py' for an extensionless script, by its shebang."""
    if path.suffix or not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            first = f.readline(200)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return "py" if b"python" in first else "sh"


def source_files(root: Path) -> list[tuple[Path, str]]:
    out = []
    for path in walk(root):
        if path.suffix in SOURCE_SUFFIXES:
            out.append((path, path.suffix.lstrip(".")))
        else:
            kind = is_script(path)
            if kind:
                out.append((path, kind))
    return out


def hash_comments(text: str) -> dict[int, str]:
    """Comment text after `#` outside quotes, per line (shell, TOML, YAML)."""
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        quote = None
        for i, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = None
                elif ch == "\\" and quote == '"':
                    continue
            elif ch in "'\"":
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
                if not (number == 1 and line.startswith("#!")):
                    out[number] = line[i + 1:]
                break
    return out


def rust_comments(text: str) -> dict[int, str]:
    """Text of `//` comments (doc comments included) and `/* */` blocks, per line, outside
    string and character literals."""
    out: dict[int, str] = {}
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[line] = out.get(line, "") + text[i + 2:end]
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                out[line + k] = out.get(line + k, "") + part
            line += text.count("\n", i, end)
            i = end + 2
        elif ch == "r" and re.match(r'r#*"', text[i:i + 40]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            close = '"' + hashes
            end = text.find(close, i + len(hashes) + 2)
            end = n if end < 0 else end + len(close)
            line += text.count("\n", i, end)
            i = end
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, j)
            i = j + 1
        elif ch == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or text.startswith("'\\u{", i):
            i = text.find("'", i + 2) + 1
        else:
            i += 1
    return out


def python_comments(text: str) -> dict[int, str]:
    """`#` comments and docstrings (every string that stands alone as a statement), per line."""
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and not (tok.start[0] == 1 and tok.string.startswith("#!")):
                out[tok.start[0]] = tok.string[1:]
        tree = ast.parse(text)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return hash_comments(text)
    lines = text.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                out[number] = out.get(number, "") + " " + lines[number - 1]
    return out


def comments_of(text: str, kind: str) -> dict[int, str]:
    if kind == "rs":
        return rust_comments(text)
    if kind == "py":
        return python_comments(text)
    return hash_comments(text)


COMMENT_LEAD = re.compile(r"^\s*(?://[/!]?|#|\*|--)?\s*")


def references(lines: list[str]):
    """(line number, path, anchor, heading) of each Markdown-file reference; a `"Heading` left
    open at the end of a line continues on the next line."""
    for index, line in enumerate(lines):
        for m in MD_REF.finditer(line):
            path, anchor, heading, closed = m.group(1), m.group(2), m.group(3), m.group(4)
            if heading is not None and not closed:
                nxt = lines[index + 1] if index + 1 < len(lines) else ""
                rest = COMMENT_LEAD.sub("", nxt, count=1)
                tail = rest.split('"', 1)
                heading = (heading + " " + tail[0]).strip() if len(tail) == 2 else None
            yield index + 1, path, anchor, heading


def check_source(root: Path, docs: Docs, path: Path, kind: str) -> list[str]:
    problems = []
    rel = path.relative_to(root)
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return problems
    lines = text.splitlines()
    for number, target, anchor, heading in references(lines):
        dest = root / target
        if not dest.is_file():
            problems.append(f"{rel}:{number}: reference to {target}: no such file")
            continue
        anchors, titles = docs.of(dest)
        if anchor and anchor not in anchors:
            problems.append(f"{rel}:{number}: reference to {target}#{anchor}: no such heading")
        if heading is not None and heading not in titles and github_anchor(heading) not in anchors:
            problems.append(f'{rel}:{number}: reference to {target} "{heading}": no such heading')
    spec = root / "docs" / "spec"
    for number, line in enumerate(lines, 1):
        for m in SPEC_NAME.finditer(line):
            if not (spec / m.group(1)).is_file():
                problems.append(f"{rel}:{number}: specification {m.group(1)} is not in docs/spec/")
        if SPEC_OUTSIDE.search(line):
            problems.append(f"{rel}:{number}: points at a specification outside the repository (use docs/spec/)")
    for number, comment in sorted(comments_of(text, kind).items()):
        if STALE_README.search(comment):
            problems.append(f"{rel}:{number}: comment cites a README section; cite docs/<page>.md \"<Heading>\" instead")
    return problems


def check(root: Path) -> list[str]:
    root = root.resolve()
    docs = Docs(root)
    problems = []
    for path in markdown_files(root):
        problems += check_markdown(root, docs, path)
    for path, kind in source_files(root):
        if path.relative_to(root) == SELF:
            continue  # its self-test plants broken references on purpose
        problems += check_source(root, docs, path, kind)
    return problems


# --------------------------------------------------------------------------------------------
# Self-test


def self_test() -> int:
    readme = "READ" + "ME"
    planted = {
        "README.md": "# Project\n\nSee [the page](docs/page.md#good-heading) and [gone](docs/gone.md).\n",
        "CHANGELOG.md": "# Changelog\n\n[bad anchor](docs/page.md#no-such-heading)\n",
        "docs/page.md": (
            "# Page\n\n## Good heading\n\n### `Code` in a heading (with: punctuation)\n\n"
            "[self](#code-in-a-heading-with-punctuation) [up](../README.md#project)\n\n"
            f"As {readme} \"Old section\" said. `{readme} \"in code\"` is fine.\n\n"
            "```\n[not a link](nowhere.md)\n```\n"),
        "docs/spec/known-spec.md": "spec\n",
        "src/lib.rs": (
            '//! Sound: docs/page.md "Good heading", docs/page.md#good-heading, docs/page.md "Code in a\n'
            "//! heading (with: punctuation)\".\n"
            f'//! Stale: ({readme} §Storage layout).\n'
            'fn f() -> &\'static str {\n'
            f'    "{readme} §in a string literal is not a comment"\n'
            "}\n"
            '/// Wrong heading: docs/page.md "Missing heading".\n'
            "// Missing page: docs/absent.md\n"
            "// Missing spec: " + "openwop" + "-not-pinned.md\n"),
        "tool.py": (
            f'"""Module doc citing {readme} "Search"."""\n'
            f'MESSAGE = "{readme} \\"Search\\" in a string is fine"\n'
            "# see docs/page.md \"Good heading\"\n"),
        "run": f"#!/usr/bin/env bash\n# The test command ({readme} \"Tests\")\necho '{readme} §x'\n",
    }
    expected = [
        ("README.md:3", "docs/gone.md"),
        ("CHANGELOG.md:3", "#no-such-heading"),
        ("docs/page.md:9", "README section"),
        ("src/lib.rs:3", "README section"),
        ("src/lib.rs:7", '"Missing heading"'),
        ("src/lib.rs:8", "docs/absent.md"),
        ("src/lib.rs:9", "not-pinned.md"),
        ("tool.py:1", "README section"),
        ("run:2", "README section"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in planted.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        problems = check(root)
    failures = []
    for where, what in expected:
        if not any(p.startswith(where + ":") and what in p for p in problems):
            failures.append(f"not reported: {where} ({what})")
    allowed = {where for where, _ in expected}
    for p in problems:
        if ":".join(p.split(":", 2)[:2]) not in allowed:
            failures.append(f"reported but sound: {p}")
    if failures:
        print("doc_links self-test FAILED:", *failures, "problems reported were:", *problems, sep="\n  ")
        return 1
    print(f"doc_links self-test: {len(expected)} planted problems reported, nothing else")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true", help="check the checker on a planted tree")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = check(args.root)
    for p in problems:
        print(p)
    if problems:
        print(f"doc_links: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"doc_links: every link and reference resolves ({len(markdown_files(args.root.resolve()))} Markdown files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
