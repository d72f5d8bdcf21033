//! Reads the labelled set (JSON lines with a `text` field) on stdin and writes, per line, the
//! projected text and the detected spans as character offsets (`[start, end, kind]`), for
//! `tests/quality/projection_contender.py`. `--split <name>` keeps only that split's lines;
//! `--misses` prints, instead, the tune lines where the profile and the labels disagree.

use std::io::{self, BufRead, Write};

use contact_projection::{detect, project};

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let split = args
        .iter()
        .position(|a| a == "--split")
        .and_then(|i| args.get(i + 1).cloned());
    let misses = args.iter().any(|a| a == "--misses");
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for line in io::stdin().lock().lines() {
        let line = line?;
        let Ok(item) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(split) = &split {
            if item["split"].as_str() != Some(split) {
                continue;
            }
        }
        let text = item["text"].as_str().unwrap_or_default();
        let spans = detect(text);
        let chars = |b: usize| text.get(..b).map_or(0, |s| s.chars().count());
        let spans_json: Vec<serde_json::Value> = spans
            .iter()
            .map(|d| serde_json::json!([chars(d.start), chars(d.end), d.kind.as_str()]))
            .collect();
        if misses {
            let contacts: Vec<&str> = item["contacts"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c.as_str()).collect())
                .unwrap_or_default();
            let covered = |c: &str| {
                text.find(c).is_some_and(|s| {
                    let e = s + c.len();
                    let mut at = s;
                    for d in &spans {
                        if d.start <= at && d.end > at {
                            at = d.end;
                        }
                    }
                    at >= e
                })
            };
            let bad = if contacts.is_empty() {
                !spans.is_empty()
            } else {
                !contacts.iter().all(|c| covered(c))
            };
            if bad {
                let found: Vec<&str> = spans
                    .iter()
                    .filter_map(|d| text.get(d.start..d.end))
                    .collect();
                writeln!(out, "{}\n   want {:?}\n   got  {:?}", text, contacts, found)?;
            }
            continue;
        }
        let record = serde_json::json!({
            "projected": project(text).text,
            "spans": spans_json,
        });
        writeln!(out, "{record}")?;
    }
    Ok(())
}
