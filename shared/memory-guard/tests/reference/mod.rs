//! Reference model of SR-1 redaction: a plain, slow restatement of the semantics in the
//! `memory_guard::redaction` module docs, written for obviousness rather than speed
//! (O(text × patterns × pattern length)). The property tests and the `redact_vs_model` fuzz
//! target (which includes this file by path) compare the engine against it.
#![allow(dead_code)]

use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;

const PREFIX: &str = "[REDACTED:";

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"._:/@-".contains(&b)
}

/// Whether the registry accepts this id.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(is_id_byte)
}

/// What a registry holds after `registered` was passed to `register` in order: invalid ids and
/// values over 64 KiB are rejected, and a value registered again keeps its first id.
fn registry(registered: &[(String, String)]) -> (Vec<&str>, Vec<&str>) {
    let mut ids: Vec<&str> = Vec::new();
    let mut values: Vec<&str> = Vec::new();
    for (id, value) in registered {
        if valid_id(id) && value.len() <= 64 * 1024 && !values.contains(&value.as_str()) {
            ids.push(id);
            values.push(value);
        }
    }
    (ids, values)
}

/// Active pattern forms and the registration index each names: every value of at least 8
/// chars, its NFC form and its NFD form (duplicates are harmless here).
fn active_forms(values: &[&str]) -> Vec<(String, usize)> {
    let mut forms = Vec::new();
    for (secret, value) in values.iter().enumerate() {
        if value.chars().count() >= 8 {
            forms.push((value.to_string(), secret));
            forms.push((value.nfc().collect(), secret));
            forms.push((value.nfd().collect(), secret));
        }
    }
    forms
}

/// `sha256:` and the first 32 hex digits of the SHA-256 of `id`.
fn digest_name(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Rule 6: the name each secret's markers carry. An id holding an active form is replaced by
/// its digest name, again while the name holds one (at most 4 times; `None`: fail closed).
fn names(ids: &[&str], forms: &[(String, usize)]) -> Option<Vec<String>> {
    let carries = |name: &str| forms.iter().any(|(f, _)| name.contains(f.as_str()));
    let mut names: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    for _ in 0..4 {
        if !names.iter().any(|n| carries(n)) {
            return Some(names);
        }
        for n in names.iter_mut().filter(|n| carries(n)) {
            *n = digest_name(n);
        }
    }
    (!names.iter().any(|n| carries(n))).then_some(names)
}

/// End of the well-formed marker starting at `p`, if one does: `[REDACTED:` + 1..=128 id
/// bytes + `]`, the id containing no active form.
fn marker_end(text: &str, p: usize, forms: &[(String, usize)]) -> Option<usize> {
    let bytes = text.as_bytes();
    if !bytes[p..].starts_with(PREFIX.as_bytes()) {
        return None;
    }
    let id_start = p + PREFIX.len();
    let mut id_end = id_start;
    while id_end < bytes.len() && is_id_byte(bytes[id_end]) {
        id_end += 1;
    }
    let id = &text[id_start..id_end];
    let ok = (1..=128).contains(&id.len())
        && bytes.get(id_end) == Some(&b']')
        && !forms.iter().any(|(f, _)| id.contains(f.as_str()));
    ok.then_some(id_end + 1)
}

/// Redacts `text` as a registry holding `registered` (in registration order, as passed to
/// `SecretRegistry::register`) would. Returns the output and the number of spans replaced.
pub fn redact(registered: &[(String, String)], text: &str) -> (String, usize) {
    let (ids, values) = registry(registered);
    let forms = active_forms(&values);
    let bytes = text.as_bytes();
    let Some(names) = names(&ids, &forms) else {
        return match text.is_empty() {
            true => (String::new(), 0),
            false => ("[REDACTED:redactor-unavailable]".to_string(), 1),
        };
    };

    // Markers, scanning left to right (they cannot overlap, so this is just every marker).
    let mut in_marker = vec![false; bytes.len()];
    let mut p = 0;
    while p < bytes.len() {
        match marker_end(text, p, &forms) {
            Some(end) => {
                in_marker[p..end].iter_mut().for_each(|m| *m = true);
                p = end;
            }
            None => p += 1,
        }
    }

    // Occurrences: every start, every form, containing no marker byte (so inside a segment).
    let mut occurrences: Vec<(usize, usize, usize)> = Vec::new(); // (start, end, secret)
    for start in 0..bytes.len() {
        for (form, secret) in &forms {
            let end = start + form.len();
            if bytes[start..].starts_with(form.as_bytes())
                && !in_marker[start..end].iter().any(|&m| m)
            {
                occurrences.push((start, end, *secret));
            }
        }
    }

    // Coverage bitmap; spans are maximal covered runs; each is named by its longest occurrence,
    // then the leftmost, then the lowest registration index.
    let mut covered = vec![false; bytes.len()];
    for &(start, end, _) in &occurrences {
        covered[start..end].iter_mut().for_each(|c| *c = true);
    }
    let mut out = String::new();
    let mut count = 0;
    let mut at = 0;
    while at < bytes.len() {
        let run_end = (at..bytes.len())
            .find(|&i| covered[i] != covered[at])
            .unwrap_or(bytes.len());
        if !covered[at] {
            out.push_str(&text[at..run_end]);
        } else {
            let key = |&(s, e, secret): &(usize, usize, usize)| {
                (e - s, std::cmp::Reverse(s), std::cmp::Reverse(secret))
            };
            let best = occurrences
                .iter()
                .filter(|&&(s, e, _)| s >= at && e <= run_end)
                .max_by_key(|o| key(o))
                .expect("a covered byte lies in an occurrence");
            out.push_str(PREFIX);
            out.push_str(&names[best.2]);
            out.push(']');
            count += 1;
        }
        at = run_end;
    }
    (out, count)
}

/// The "no survivor" check: splits `output` at its well-formed markers and at every
/// `[REDACTED:<registered id>]`, and returns an active form found in one of the pieces.
pub fn survivor(registered: &[(String, String)], output: &str) -> Option<String> {
    let (ids, values) = registry(registered);
    let forms = active_forms(&values);
    let emitted: Vec<String> = names(&ids, &forms)
        .unwrap_or_default()
        .iter()
        .map(|name| format!("{PREFIX}{name}]"))
        .collect();
    let bytes = output.as_bytes();
    let mut pieces: Vec<&str> = Vec::new();
    let mut piece_start = 0;
    let mut p = 0;
    while p < bytes.len() {
        let end = emitted
            .iter()
            .find(|m| bytes[p..].starts_with(m.as_bytes()))
            .map(|m| p + m.len())
            .or_else(|| marker_end(output, p, &forms));
        match end {
            Some(end) => {
                pieces.push(&output[piece_start..p]);
                piece_start = end;
                p = end;
            }
            None => p += 1,
        }
    }
    pieces.push(&output[piece_start..]);
    pieces.iter().find_map(|piece| {
        forms
            .iter()
            .find(|(f, _)| piece.contains(f.as_str()))
            .map(|(f, _)| f.clone())
    })
}

/// An active form inside the name of a marker of `output` (rule 6: there is none). The marker's
/// fixed syntax is not a name: a "value" like `[REDACTE` stands in every marker, whatever it
/// names, and text outside markers is the survivor check's.
pub fn value_in_a_marker_name(registered: &[(String, String)], output: &str) -> Option<String> {
    let (_, values) = registry(registered);
    let forms = active_forms(&values);
    let bytes = output.as_bytes();
    let mut found = None;
    let mut p = 0;
    while let Some(at) = output[p..].find(PREFIX) {
        let start = p + at + PREFIX.len();
        let mut end = start;
        while end < bytes.len() && is_id_byte(bytes[end]) {
            end += 1;
        }
        if bytes.get(end) == Some(&b']') && end > start {
            let name = &output[start..end];
            found = found.or_else(|| {
                forms
                    .iter()
                    .find(|(f, _)| name.contains(f.as_str()))
                    .map(|(f, _)| f.clone())
            });
        }
        p = start;
    }
    found
}

/// Whether an active form occurs inside a registered id (rule 6 then names it by its digest).
pub fn value_in_some_id(registered: &[(String, String)]) -> bool {
    let (ids, values) = registry(registered);
    let forms = active_forms(&values);
    ids.iter()
        .any(|id| forms.iter().any(|(f, _)| id.contains(f.as_str())))
}
