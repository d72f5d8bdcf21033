//! Recall and false-positive rate of the profile on the labelled set `tests/data/contact_v1.jsonl`
//! (see docs/projection.md "Measured"). A contact counts as removed when every byte of it is
//! inside a detected span, and then the projected text no longer contains it; a look-alike line
//! (nothing to remove) counts as a false positive when anything in it is detected. The held-out
//! split was written before the detectors were tuned and was not looked at while tuning.

use std::collections::BTreeMap;

use contact_projection::{detect, project, Detection};

struct Line {
    text: String,
    contacts: Vec<String>,
    kind: String,
    split: String,
    lang: String,
}

fn lines() -> Vec<Line> {
    include_str!("data/contact_v1.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            let s = |k: &str| v[k].as_str().expect("a string field").to_owned();
            Line {
                text: s("text"),
                contacts: v["contacts"]
                    .as_array()
                    .expect("contacts")
                    .iter()
                    .map(|c| c.as_str().expect("a contact").to_owned())
                    .collect(),
                kind: s("kind"),
                split: s("split"),
                lang: s("lang"),
            }
        })
        .collect()
}

fn covered(spans: &[Detection], start: usize, end: usize) -> bool {
    let mut at = start;
    for d in spans {
        if d.start <= at && d.end > at {
            at = d.end;
        }
    }
    at >= end
}

#[derive(Default)]
struct Tally {
    hit: usize,
    total: usize,
}

impl Tally {
    fn rate(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.hit as f64 / self.total as f64
        }
    }
}

#[test]
fn recall_and_false_positive_rate_per_split() {
    let lines = lines();
    let mut recall: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut fp: BTreeMap<String, Tally> = BTreeMap::new();
    let mut langs = std::collections::BTreeSet::new();
    for line in &lines {
        langs.insert(line.lang.clone());
        let spans = detect(&line.text);
        let projected = project(&line.text).text;
        if line.contacts.is_empty() {
            let t = fp.entry(line.split.clone()).or_default();
            t.total += 1;
            t.hit += usize::from(!spans.is_empty());
            continue;
        }
        for c in &line.contacts {
            let start = line
                .text
                .find(c.as_str())
                .expect("a contact is a substring of its text");
            let removed = covered(&spans, start, start + c.len());
            if removed {
                assert!(!projected.contains(c.as_str()), "a removed value is gone");
            }
            for kind in [line.kind.clone(), "all".to_owned()] {
                let t = recall.entry((line.split.clone(), kind)).or_default();
                t.total += 1;
                t.hit += usize::from(removed);
            }
        }
    }
    for ((split, kind), t) in &recall {
        println!(
            "recall {split:8} {kind:8} {:.3} ({}/{})",
            t.rate(),
            t.hit,
            t.total
        );
    }
    for (split, t) in &fp {
        println!(
            "fp     {split:8} look-alikes {:.3} ({}/{})",
            t.rate(),
            t.hit,
            t.total
        );
    }
    let contacts: usize = recall
        .iter()
        .filter(|((_, k), _)| k == "all")
        .map(|(_, t)| t.total)
        .sum();
    let lookalikes: usize = fp.values().map(|t| t.total).sum();
    assert!(contacts >= 220 && lookalikes >= 220 && langs.len() >= 8);

    let all = |split: &str| recall[&(split.to_owned(), "all".to_owned())].rate();
    assert!(
        all("tune") >= TUNE_RECALL_FLOOR,
        "tune recall {}",
        all("tune")
    );
    assert!(
        all("heldout") >= HELDOUT_RECALL_FLOOR,
        "held-out recall {}",
        all("heldout")
    );
    for (split, t) in &fp {
        assert!(
            t.rate() <= FP_CEILING,
            "{split} false-positive rate {}",
            t.rate()
        );
    }
}

// Floors below the measured figures (docs/projection.md "Measured").
const TUNE_RECALL_FLOOR: f64 = 0.95;
const HELDOUT_RECALL_FLOOR: f64 = 0.90;
const FP_CEILING: f64 = 0.03;
