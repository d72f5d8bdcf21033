//! Turns the word lists in `data/` into Rust constants, sorted for binary search, so the
//! lists stay plain text a linguist can edit while lookups cost what a hand-written table
//! costs (a `WordSet` over a list is built at compile time). A malformed line, a repeated key
//! or an unsorted-after-sorting surprise fails the build with the file and line.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

fn rows(name: &str, columns: usize) -> Vec<Vec<String>> {
    let path = Path::new("data").join(name);
    println!("cargo:rerun-if-changed={}", path.display());
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<String> = line.split('\t').map(str::to_owned).collect();
        assert!(
            cols.len() == columns && cols.iter().all(|c| !c.is_empty()),
            "{name}:{}: expected {columns} tab-separated columns",
            n + 1
        );
        assert!(
            cols[0] == cols[0].to_lowercase(),
            "{name}:{}: keys are lower case",
            n + 1
        );
        if let Some(first) = seen.insert(cols[0].clone(), n + 1) {
            panic!("{name}:{}: {:?} repeats line {first}", n + 1, cols[0]);
        }
        out.push(cols);
    }
    out.sort();
    out
}

fn words(out: &mut String, constant: &str, file: &str) {
    let list = rows(file, 1);
    writeln!(out, "/// `data/{file}`, sorted.").ok();
    writeln!(out, "pub const {constant}: &[&str] = &[").ok();
    for r in list {
        writeln!(out, "    {:?},", r[0]).ok();
    }
    writeln!(out, "];").ok();
}

fn pairs(out: &mut String, constant: &str, file: &str) {
    let list = rows(file, 2);
    writeln!(out, "/// `data/{file}`, sorted by its first column.").ok();
    writeln!(out, "pub const {constant}: &[(&str, &str)] = &[").ok();
    for r in list {
        writeln!(out, "    ({:?}, {:?}),", r[0], r[1]).ok();
    }
    writeln!(out, "];").ok();
}

fn calendar(out: &mut String, constant: &str, file: &str, max: u8) {
    let list = rows(file, 3);
    writeln!(out, "/// `data/{file}`, sorted by form.").ok();
    writeln!(out, "pub const {constant}: &[(&str, u8, Kind)] = &[").ok();
    for r in list {
        let n: u8 = r[1]
            .parse()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .unwrap_or_else(|| panic!("{file}: {:?} is not a number 1-{max}", r[1]));
        let kind = match r[2].as_str() {
            "name" => "Name",
            "short" => "Short",
            "ambiguous" => "Ambiguous",
            other => panic!("{file}: kind {other:?} is not name, short or ambiguous"),
        };
        writeln!(out, "    ({:?}, {n}, Kind::{kind}),", r[0]).ok();
    }
    writeln!(out, "];").ok();
}

fn main() {
    let mut out = String::new();
    words(&mut out, "VALUE_WORDS", "value-words.txt");
    words(&mut out, "CHANGE_VERBS", "change-verbs.txt");
    words(&mut out, "FUNCTION_WORDS", "function-words.txt");
    pairs(&mut out, "IRREGULAR_PAST", "irregular-verbs.tsv");
    pairs(&mut out, "NUMBER_WORDS", "number-words.tsv");
    pairs(&mut out, "SPELLINGS", "spellings.tsv");
    pairs(&mut out, "ABBREVIATIONS", "abbreviations.tsv");
    pairs(&mut out, "UNITS", "units.tsv");
    pairs(&mut out, "MODALITY", "modality.tsv");
    calendar(&mut out, "MONTHS", "months.tsv", 12);
    calendar(&mut out, "WEEKDAYS", "weekdays.tsv", 7);
    // Every word a notation rule reads: the keys of the lists it reads, and its own words.
    let mut triggers: Vec<String> = rows("notation-triggers.txt", 1)
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    for file in [
        "number-words.tsv",
        "abbreviations.tsv",
        "units.tsv",
        "spellings.tsv",
    ] {
        triggers.extend(rows(file, 2).into_iter().map(|r| r[0].clone()));
    }
    triggers.extend(rows("months.tsv", 3).into_iter().map(|r| r[0].clone()));
    triggers.extend(
        rows("weekdays.tsv", 3)
            .into_iter()
            .filter(|r| r[2] == "short")
            .map(|r| r[0].clone()),
    );
    // "#" ("order # 4471") cannot stand on a line of its own in these files, where it opens a
    // comment.
    triggers.push("#".to_owned());
    triggers.sort();
    triggers.dedup();
    writeln!(
        out,
        "/// Every word that can make a notation rule change a text, sorted: `data/notation-triggers.txt`\n/// and the keys of the lists the rules read."
    )
    .ok();
    writeln!(out, "pub const NOTATION_TRIGGERS: &[&str] = &[").ok();
    for t in &triggers {
        writeln!(out, "    {t:?},").ok();
    }
    writeln!(out, "];").ok();
    println!("cargo:rerun-if-changed=data/wordnet-synsets.tsv");
    let dir = env::var("OUT_DIR").unwrap_or_else(|e| panic!("OUT_DIR: {e}"));
    fs::write(Path::new(&dir).join("tables.rs"), out).unwrap_or_else(|e| panic!("{e}"));
}
