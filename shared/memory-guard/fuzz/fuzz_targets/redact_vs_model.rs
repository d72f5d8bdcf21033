//! Engine against the reference model (`tests/reference/mod.rs`, included by path so there is
//! one model) on fuzzer-chosen secrets and text.
//!
//! Input layout: the first byte picks padding (none, a dozen or seventy unrelated secrets,
//! alphanumeric or a `sk-live-` family, so every finder is reached) and whether every secret
//! shares the prefix `wallet` (the padding then alternating it with a second prefix: the
//! prefix finder with one prefix or several); the rest is split at NUL
//! bytes, the last part being the text and each earlier part a secret, written `id\x01value`
//! or just `value` (id `s<index>`). Invalid ids are rejected by the registry and skipped by
//! the model alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_guard::SecretRegistry;

#[path = "../../tests/reference/mod.rs"]
mod reference;

const SHARED: &str = "wallet";

fn padding(selector: u8) -> Vec<(String, String)> {
    let count = match selector % 4 {
        0 => 0,
        1 => 12,
        _ => 70,
    };
    let family = selector & 4 != 0;
    let shared = selector & 8 != 0;
    (0..count)
        .map(|i: u64| {
            let value = if shared {
                let head = if i % 2 == 0 { SHARED } else { "pursey" };
                let mixed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                format!("{head}{mixed:x}{i}")
            } else if family {
                format!("sk-live-pad{i:03}x")
            } else {
                let mixed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
                format!("{mixed:x}Zq{i}").chars().rev().collect()
            };
            (format!("pad-{i}"), value)
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut parts: Vec<String> = rest
        .split(|&b| b == 0)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let text = parts.pop().unwrap_or_default();
    if parts.len() > 8 {
        return;
    }
    let mut secrets: Vec<(String, String)> = parts
        .iter()
        .enumerate()
        .map(|(i, part)| match part.split_once('\u{1}') {
            Some((id, value)) => (id.to_owned(), value.to_owned()),
            None => (format!("s{i}"), part.clone()),
        })
        .collect();
    if selector & 8 != 0 {
        for (_, value) in &mut secrets {
            value.insert_str(0, SHARED);
        }
    }
    secrets.extend(padding(selector));

    let mut registry = SecretRegistry::new();
    for (id, value) in &secrets {
        let _ = registry.register(id.as_str(), value.as_str());
    }
    let redactor = registry.redactor();

    let expected = reference::redact(&secrets, &text);
    let (out, count) = redactor.redact_counting(&text);
    assert_eq!(
        (out.as_ref(), count),
        (expected.0.as_str(), expected.1),
        "fast path"
    );
    // The second text a redactor sees takes the overlap-reach shortcut.
    let (again, again_count) = redactor.redact_counting(&text);
    assert_eq!(
        (again.as_ref(), again_count),
        (expected.0.as_str(), expected.1),
        "second text"
    );
    let (slow, slow_count) = redactor.redact_counting_fallback(&text);
    assert_eq!(
        (slow.as_ref(), slow_count),
        (expected.0.as_str(), expected.1),
        "fallback"
    );
    assert_eq!(count == 0, matches!(out, std::borrow::Cow::Borrowed(_)));
    assert_eq!(reference::survivor(&secrets, &out), None, "survivor");
    assert_eq!(
        reference::value_in_a_marker_name(&secrets, &out),
        None,
        "a value in a marker name"
    );
    assert_eq!(redactor.redact(&out), out, "idempotence");
});
