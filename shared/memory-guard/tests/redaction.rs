//! SR-1: registered secret values are persisted as `[REDACTED:<secretId>]`.

use std::borrow::Cow;

use memory_guard::{GuardError, Redactor, SecretRegistry, MAX_SECRET_BYTES, MIN_SECRET_CHARS};

mod reference;

fn redactor(secrets: &[(&str, &str)]) -> Redactor {
    let mut reg = SecretRegistry::new();
    for (id, value) in secrets {
        reg.register(*id, *value).unwrap();
    }
    reg.redactor()
}

/// `text` comes out of `r` as `want`, with `markers` markers written.
#[track_caller]
fn assert_redacted<'a>(r: &Redactor, text: &'a str, want: &str, markers: usize) -> Cow<'a, str> {
    let (out, n) = r.redact_counting(text);
    assert_eq!(out, want);
    assert_eq!(n, markers);
    out
}

/// Each `(text, redacted)` of `cases` holds whichever of the two secrets is registered first.
fn in_both_orders(secrets: [(&str, &str); 2], cases: &[(&str, &str)]) {
    for order in [[0, 1], [1, 0]] {
        let r = redactor(&[secrets[order[0]], secrets[order[1]]]);
        for (text, redacted) in cases {
            assert_eq!(r.redact(text), *redacted, "order {order:?}");
        }
    }
}

#[test]
fn replaces_every_occurrence_with_its_marker() {
    let r = redactor(&[("openai", "sk-live-abcdef123")]);
    let out = assert_redacted(
        &r,
        "key=sk-live-abcdef123; again sk-live-abcdef123.",
        "key=[REDACTED:openai]; again [REDACTED:openai].",
        2,
    );
    assert!(matches!(out, Cow::Owned(_)));
}

#[test]
fn untouched_text_is_borrowed() {
    let r = redactor(&[("openai", "sk-live-abcdef123")]);
    let text = "nothing secret here, not even sk-live-abcdef12";
    let (out, n) = r.redact_counting(text);
    assert!(matches!(out, Cow::Borrowed(s) if std::ptr::eq(s, text)));
    assert_eq!(n, 0);
}

#[test]
fn empty_registry_borrows() {
    let r = SecretRegistry::new().redactor();
    assert!(r.is_empty());
    assert_eq!(r.len(), 0);
    let text = "anything at all [REDACTED:x]";
    assert!(matches!(r.redact(text), Cow::Borrowed(s) if s == text));
    assert_eq!(r.redact_counting(text).1, 0);
}

#[test]
fn overlapping_secrets_are_redacted_whole_as_one_span() {
    let r = redactor(&[("first", "abcdefghij"), ("second", "ghijklmnop")]);
    // One span covers both; equally long, so the leftmost occurrence names it.
    assert_redacted(&r, "xxabcdefghijklmnopxx", "xx[REDACTED:first]xx", 1);
    // Each is still redacted on its own.
    assert_eq!(r.redact("ghijklmnop"), "[REDACTED:second]");
}

/// Regression: the old single leftmost-longest scan left `345xyz` in clear.
#[test]
fn overlap_leaves_no_tail_in_clear() {
    let r = redactor(&[("a", "abcdefgh12"), ("b", "fgh12345xyz")]);
    // The longer occurrence names the span.
    assert_redacted(&r, "k=abcdefgh12345xyz;", "k=[REDACTED:b];", 1);
    // Same with many patterns (the skip-table finder) and on the fallback path.
    let mut all: Vec<(String, String)> = vec![
        ("a".into(), "abcdefgh12".into()),
        ("b".into(), "fgh12345xyz".into()),
    ];
    all.extend((0..100).map(|i| (format!("pad{i}"), format!("padding-value-{i:04}"))));
    let mut reg = SecretRegistry::new();
    for (id, value) in &all {
        reg.register(id.as_str(), value.as_str()).unwrap();
    }
    let r = reg.redactor();
    assert_eq!(r.redact("k=abcdefgh12345xyz;"), "k=[REDACTED:b];");
    assert_eq!(
        r.redact_counting_fallback("k=abcdefgh12345xyz;").0,
        "k=[REDACTED:b];"
    );
}

#[test]
fn adjacent_occurrences_merge_into_one_marker() {
    let r = redactor(&[("a", "aaaaaaaa1"), ("b", "bbbbbbbb22")]);
    assert_redacted(&r, "<aaaaaaaa1bbbbbbbb22>", "<[REDACTED:b]>", 1);
    // Equal lengths: the leftmost names the span.
    let r = redactor(&[("a", "aaaaaaaa1"), ("b", "bbbbbbbb2")]);
    assert_eq!(r.redact("aaaaaaaa1bbbbbbbb2"), "[REDACTED:a]");
    // A marker between them keeps them apart.
    assert_redacted(
        &r,
        "aaaaaaaa1[REDACTED:zz]bbbbbbbb2",
        "[REDACTED:a][REDACTED:zz][REDACTED:b]",
        2,
    );
}

/// Regression: a value equal to part of a marker used to rewrite markers already in the text.
#[test]
fn value_inside_marker_syntax_leaves_markers_alone() {
    let r = redactor(&[("r", "REDACTED"), ("k", "sk-live-abcdef123")]);
    let text = "see [REDACTED:openai] and [REDACTED:k]";
    assert!(matches!(r.redact(text), Cow::Borrowed(_)));
    // Outside a marker it is an ordinary value.
    assert_eq!(
        r.redact("REDACTED sk-live-abcdef123 [REDACTED:k]"),
        "[REDACTED:r] [REDACTED:k] [REDACTED:k]"
    );
    // A marker prefix without a valid id is ordinary text.
    assert_eq!(r.redact("[REDACTED:]"), "[[REDACTED:r]:]");
}

#[test]
fn nfc_and_nfd_spellings_are_both_found() {
    let composed = "caf\u{e9}-secret-key";
    let decomposed = "cafe\u{301}-secret-key";
    for (registered, written) in [(composed, decomposed), (decomposed, composed)] {
        let r = redactor(&[("cafe", registered)]);
        for text in [registered, written] {
            let text = format!("x {text} y");
            assert_redacted(&r, &text, "x [REDACTED:cafe] y", 1);
        }
    }
    // The floor is judged on the registered value: 8 chars NFD, 4 chars (8 bytes) NFC.
    let nfd_eight = "e\u{301}e\u{301}e\u{301}e\u{301}";
    let r = redactor(&[("accents", nfd_eight)]);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.redact("<\u{e9}\u{e9}\u{e9}\u{e9}>"),
        "<[REDACTED:accents]>"
    );
}

#[test]
fn marker_whose_id_contains_a_secret_is_ordinary_text() {
    let r = redactor(&[("k", "sk-live-0123456789")]);
    assert_eq!(
        r.redact("[REDACTED:sk-live-0123456789-old]"),
        "[REDACTED:[REDACTED:k]-old]"
    );
    // Also when the id contains another form of a non-ASCII value: ids are ASCII, so only an
    // ASCII form can appear, which for a non-ASCII value needs a compatibility character...
    // and NFC/NFD are canonical, so the ASCII value case above is the whole story.
    assert!(matches!(
        r.redact("[REDACTED:sk-live-012345678]"),
        Cow::Borrowed(_)
    ));
}

#[test]
fn marker_prefix_before_a_marker() {
    // `[REDACTED:[REDACTED:x]`: the first prefix has no id, so it is text; the second is a
    // marker. A value ending inside the first prefix is redacted, one crossing into the
    // marker is not.
    let text = "ab[REDACTED:[REDACTED:x]";
    let r = redactor(&[("s", "ab[REDACTED:")]);
    assert_eq!(r.redact(text), "[REDACTED:s][REDACTED:x]");
    let r = redactor(&[("s", "ab[REDACTED:[")]);
    assert!(matches!(r.redact(text), Cow::Borrowed(_)));
    assert_eq!(r.redact_counting_fallback(text).1, 0);
}

#[test]
fn long_values_match_the_reference_model() {
    // PEM-sized values (beyond the Teddy searcher's length bound) with a few short ones.
    let pem = format!(
        "-----BEGIN KEY-----\n{}\n-----END KEY-----",
        "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu".repeat(12)
    );
    let secrets: Vec<(String, String)> = vec![
        ("pem".into(), pem.clone()),
        ("tail".into(), pem[pem.len() - 40..].to_owned()),
        ("k".into(), "sk-live-0123456789".into()),
    ];
    let mut reg = SecretRegistry::new();
    for (id, value) in &secrets {
        reg.register(id.as_str(), value.as_str()).unwrap();
    }
    let r = reg.redactor();
    let text = format!(
        "a {pem} b {} c sk-live-0123456789 [REDACTED:pem] {pem}",
        &pem[..100]
    );
    let expected = reference::redact(&secrets, &text);
    for _ in 0..2 {
        let (out, n) = r.redact_counting(&text);
        assert_eq!((out.as_ref(), n), (expected.0.as_str(), expected.1));
    }
    assert_eq!(expected.1, 3);
}

#[test]
fn pathological_nested_values_stay_linear() {
    // a{8}, a{9}, ... a{300} over a long run of `a`: every position starts an occurrence.
    let mut reg = SecretRegistry::new();
    for len in 8..=300 {
        reg.register(format!("a{len}"), "a".repeat(len)).unwrap();
    }
    let r = reg.redactor();
    let text = format!("x{}y", "a".repeat(200_000));
    let started = std::time::Instant::now();
    assert_redacted(&r, &text, "x[REDACTED:a300]y", 1);
    // Generous even for an unoptimised build; a quadratic scan would take minutes.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn longer_secret_containing_a_shorter_one_redacts_whole() {
    // Registration order must not matter, so try both.
    let all = [("short", "password123"), ("long", "my-password1234567")];
    in_both_orders(
        all,
        &[
            ("pw: my-password1234567!", "pw: [REDACTED:long]!"),
            ("pw: password123!", "pw: [REDACTED:short]!"),
        ],
    );
}

#[test]
fn longest_wins_between_values_starting_at_the_same_place() {
    let all = [("short", "password123"), ("long", "password1234567")];
    in_both_orders(
        all,
        &[
            ("pw=password1234567;", "pw=[REDACTED:long];"),
            ("pw=password12345;", "pw=[REDACTED:short]45;"),
        ],
    );
}

#[test]
fn regex_metacharacters_are_literal() {
    let value = r"a.b*c+?(x)[y]$^|\";
    let r = redactor(&[("meta", value)]);
    assert_eq!(r.redact(&format!("<{value}>")), "<[REDACTED:meta]>");
    // What the value would match as a regex is left alone.
    let regex_match = "aXbbbccc(x)y";
    assert!(matches!(r.redact(regex_match), Cow::Borrowed(_)));
    assert!(matches!(r.redact(".*+?()[]$^|\\"), Cow::Borrowed(_)));
}

#[test]
fn length_floor_is_eight_chars() {
    assert_eq!(MIN_SECRET_CHARS, 8);
    let r = redactor(&[("seven", "abcdefg"), ("eight", "12345678")]);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.redact("abcdefg and 12345678"),
        "abcdefg and [REDACTED:eight]"
    );
    let only_short = redactor(&[("seven", "abcdefg")]);
    assert!(only_short.is_empty());
    assert!(matches!(only_short.redact("abcdefg"), Cow::Borrowed(_)));
}

#[test]
fn floor_counts_chars_not_bytes() {
    let three_cjk = "秘密鍵"; // 3 chars, 9 bytes
    let eight_cjk = "秘密鍵秘密鍵秘密"; // 8 chars, 24 bytes
    assert_eq!(three_cjk.len(), 9);
    let r = redactor(&[("short", three_cjk), ("long", eight_cjk)]);
    assert_eq!(r.len(), 1);
    assert_eq!(r.redact("鍵は秘密鍵です"), "鍵は秘密鍵です");
    assert_eq!(
        r.redact("鍵は秘密鍵秘密鍵秘密です"),
        "鍵は[REDACTED:long]です"
    );
    // Seven 4-byte emoji are 28 bytes but still below the floor.
    let seven_emoji = "🔑🔑🔑🔑🔑🔑🔑";
    assert!(redactor(&[("e", seven_emoji)]).is_empty());
}

#[test]
fn multibyte_secrets_in_multibyte_text() {
    let value = "🔑pässwörd-日本🔐";
    let r = redactor(&[("emoji", value), ("ascii", "plainsecret")]);
    let text = format!("🙂 前{value}後 ünïcödé plainsecret🎉{value}");
    let (out, n) = r.redact_counting(&text);
    assert_eq!(
        out,
        "🙂 前[REDACTED:emoji]後 ünïcödé [REDACTED:ascii]🎉[REDACTED:emoji]"
    );
    assert_eq!(n, 3);
}

#[test]
fn an_id_holding_a_value_is_named_by_its_digest() {
    // Rule 6: a value inside a secret id would be carried by that id's markers, so such an id
    // is named by its digest; the markers are then well-formed and a second pass changes
    // nothing.
    let secrets = [
        ("db-password-prod", "hunter2hunter2"),
        ("x", "db-password-prod"),
    ];
    let r = redactor(&secrets);
    let named = memory_guard::redaction::digest_name("db-password-prod");
    assert!(
        named.starts_with("sha256:") && named.len() == 7 + 32,
        "{named}"
    );
    let once = r.redact("login hunter2hunter2");
    assert_eq!(once, format!("login [REDACTED:{named}]"));
    assert_eq!(r.redact(&once), once, "idempotent");
    let owned: Vec<(String, String)> = secrets
        .iter()
        .map(|(i, v)| (i.to_string(), v.to_string()))
        .collect();
    assert_eq!(reference::survivor(&owned, &once), None);
    assert!(reference::value_in_some_id(&owned));
    assert_eq!(r.redact("user db-password-prod"), "user [REDACTED:x]");
}

#[test]
fn a_secret_registered_under_itself_never_reaches_its_marker() {
    let value = "sk_live_51Habc0123456789";
    for id in [
        value.to_owned(),            // the id is the value
        format!("vault/{value}/v2"), // the id contains it
        format!("{value}{value}"),   // twice
    ] {
        let r = redactor(&[(id.as_str(), value)]);
        for text in [
            format!("key {value} end"),
            format!("[REDACTED:{id}]"),
            format!("tag:{value}"),
        ] {
            let out = r.redact(&text);
            assert!(!out.contains(value), "{id:?}: {out}");
            assert!(
                out.contains(&memory_guard::redaction::digest_name(&id)),
                "{out}"
            );
            assert_eq!(r.redact(&out), out, "idempotent");
        }
    }
    // An id contained in the value carries no value: it stays the marker's name.
    let r = redactor(&[("sk_live", value)]);
    assert_eq!(r.redact(value), "[REDACTED:sk_live]");
}

/// The old policy ("markers naming unregistered ids are ordinary text") is replaced by rule 2:
/// every well-formed marker is kept, whoever wrote it, unless its id contains a secret.
#[test]
fn foreign_markers_pass_through_but_cannot_hide_a_secret() {
    let r = redactor(&[("openai", "sk-live-abcdef123")]);
    let foreign = "merged: [REDACTED:older-run-key] ok";
    assert!(matches!(r.redact(foreign), Cow::Borrowed(_)));
    // Wrapping a secret in marker syntax is not a way around redaction.
    let smuggled = r.redact("[REDACTED:sk-live-abcdef123]");
    assert_eq!(smuggled, "[REDACTED:[REDACTED:openai]]");
    assert!(!smuggled.contains("sk-live-abcdef123"));
    assert_eq!(r.redact(&smuggled), smuggled);
}

#[test]
fn value_spelled_like_a_marker_never_matches_a_marker() {
    // Under rule 2 the text `[REDACTED:a]` is a marker, so the value spelled like it cannot
    // match there; it is still an active value (the old policy dropped it).
    let r = redactor(&[("a", "12345678"), ("b", "[REDACTED:a]")]);
    assert_eq!(r.len(), 2);
    assert!(matches!(r.redact("[REDACTED:a]"), Cow::Borrowed(_)));
    assert_eq!(r.redact("12345678"), "[REDACTED:a]");
}

#[test]
fn values_next_to_markers_cannot_cross_into_them() {
    // The old engine needed repeated scans here; segments make one pass final.
    let r = redactor(&[("x", "abcdefg["), ("k", "0123456789")]);
    let out = assert_redacted(&r, "abcdefg0123456789", "abcdefg[REDACTED:k]", 1);
    assert!(matches!(r.redact(&out), Cow::Borrowed(_)));
    assert_eq!(r.redact("abcdefg[ x"), "[REDACTED:x] x");
}

#[test]
fn self_referential_values_need_one_pass() {
    let r = redactor(&[("s", "x[REDACTED:s")]);
    for text in [
        "xxxxx[REDACTED:s]".to_owned(),
        format!("{}[REDACTED:s]", "x".repeat(100)),
    ] {
        assert!(matches!(r.redact(&text), Cow::Borrowed(_)));
    }
    assert_eq!(r.redact("xx[REDACTED:s!"), "x[REDACTED:s]!");
}

#[test]
fn tags_are_redacted_individually() {
    let r = redactor(&[("gh", "ghp_0123456789abcdef")]);
    let tags = vec![
        "token:ghp_0123456789abcdef".to_owned(),
        "plain".to_owned(),
        "ghp_0123456789abcdef".to_owned(),
    ];
    assert_eq!(
        r.redact_tags(&tags),
        ["token:[REDACTED:gh]", "plain", "[REDACTED:gh]"]
    );
    assert_eq!(r.redact_tags(&["a", "b"]), ["a", "b"]);
}

#[test]
fn debug_output_never_contains_values() {
    let value = "sk-live-SENTINEL-123";
    let mut reg = SecretRegistry::new();
    reg.register("openai", value).unwrap();
    reg.register("short", "SENTI").unwrap();
    for shown in [
        format!("{reg:?}"),
        format!("{reg:#?}"),
        format!("{:?}", reg.redactor()),
        format!("{:#?}", reg.redactor()),
    ] {
        assert!(!shown.contains("SENTI"), "leaked: {shown}");
    }
    let shown = format!("{reg:?}");
    assert!(shown.contains("openai") && shown.contains('2'), "{shown}");
    assert!(format!("{:?}", reg.redactor()).contains('1'));
}

#[test]
fn invalid_secret_ids_are_rejected() {
    let mut reg = SecretRegistry::new();
    let too_long = "a".repeat(129);
    for id in [
        "",
        "has space",
        "a]b",
        "a[b",
        "tab\tid",
        "new\nline",
        "ünï",
        "a%b",
        "a\\b",
        "a\0b",
        too_long.as_str(),
    ] {
        assert_eq!(
            reg.register(id, "a-perfectly-fine-secret"),
            Err(GuardError::InvalidSecretId),
            "{id:?}"
        );
    }
    assert!(reg.is_empty());
    reg.register("vault:openai/key@v2_1.0-x", "a-perfectly-fine-secret")
        .unwrap();
    reg.register("a".repeat(128), "another-fine-secret")
        .unwrap();
    assert_eq!(reg.len(), 2);
    let err = SecretRegistry::new()
        .register("bad id", "SENTINEL-VALUE")
        .unwrap_err();
    assert!(!err.to_string().contains("SENTINEL"));
}

#[test]
fn oversize_values_are_rejected() {
    let mut reg = SecretRegistry::new();
    assert_eq!(
        reg.register("big", "x".repeat(MAX_SECRET_BYTES + 1)),
        Err(GuardError::SecretTooLong)
    );
    reg.register("max", "x".repeat(MAX_SECRET_BYTES)).unwrap();
    assert_eq!(reg.len(), 1);
}

#[test]
fn duplicate_value_keeps_first_id() {
    let mut reg = SecretRegistry::new();
    reg.register("first", "same-value-123").unwrap();
    reg.register("second", "same-value-123").unwrap();
    assert_eq!(reg.len(), 1);
    assert_eq!(reg.ids().collect::<Vec<_>>(), ["first"]);
    assert_eq!(reg.redactor().redact("same-value-123"), "[REDACTED:first]");
}

#[test]
fn one_id_may_carry_rotated_values() {
    let r = redactor(&[("openai", "sk-old-0000000"), ("openai", "sk-new-1111111")]);
    assert_eq!(r.len(), 2);
    assert_eq!(
        r.redact("sk-old-0000000 sk-new-1111111"),
        "[REDACTED:openai] [REDACTED:openai]"
    );
}

#[test]
fn redactor_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Redactor>();
}
