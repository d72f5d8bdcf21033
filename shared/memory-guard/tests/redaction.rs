//! SR-1: registered secret values are persisted as `[REDACTED:<secretId>]`.

use std::borrow::Cow;

use memory_guard::{GuardError, Redactor, SecretRegistry, MAX_SECRET_BYTES, MIN_SECRET_CHARS};

fn redactor(secrets: &[(&str, &str)]) -> Redactor {
    let mut reg = SecretRegistry::new();
    for (id, value) in secrets {
        reg.register(*id, *value).unwrap();
    }
    reg.redactor()
}

#[test]
fn replaces_every_occurrence_with_its_marker() {
    let r = redactor(&[("openai", "sk-live-abcdef123")]);
    let (out, n) = r.redact_counting("key=sk-live-abcdef123; again sk-live-abcdef123.");
    assert_eq!(out, "key=[REDACTED:openai]; again [REDACTED:openai].");
    assert_eq!(n, 2);
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
fn overlapping_secrets_destroy_both_plaintexts() {
    let r = redactor(&[("first", "abcdefghij"), ("second", "ghijklmnop")]);
    let out = r.redact("xxabcdefghijklmnopxx");
    // Leftmost wins; the second secret loses its head, so neither plaintext survives.
    assert_eq!(out, "xx[REDACTED:first]klmnopxx");
    assert!(!out.contains("abcdefghij") && !out.contains("ghijklmnop"));
    // Each is still redacted on its own.
    assert_eq!(r.redact("ghijklmnop"), "[REDACTED:second]");
}

#[test]
fn longer_secret_containing_a_shorter_one_redacts_whole() {
    // Registration order must not matter, so try both.
    for order in [[0, 1], [1, 0]] {
        let all = [("short", "password123"), ("long", "my-password1234567")];
        let r = redactor(&[all[order[0]], all[order[1]]]);
        assert_eq!(r.redact("pw: my-password1234567!"), "pw: [REDACTED:long]!");
        assert_eq!(r.redact("pw: password123!"), "pw: [REDACTED:short]!");
    }
}

#[test]
fn longest_wins_between_values_starting_at_the_same_place() {
    for order in [[0, 1], [1, 0]] {
        let all = [("short", "password123"), ("long", "password1234567")];
        let r = redactor(&[all[order[0]], all[order[1]]]);
        assert_eq!(r.redact("pw=password1234567;"), "pw=[REDACTED:long];");
        assert_eq!(r.redact("pw=password12345;"), "pw=[REDACTED:short]45;");
    }
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
fn registered_markers_already_in_text_stay_intact() {
    // A secret whose value equals another secret's id must not rewrite that id's marker, or a
    // second pass would corrupt the first pass's output.
    let r = redactor(&[
        ("db-password-prod", "hunter2hunter2"),
        ("x", "db-password-prod"),
    ]);
    let once = r.redact("login hunter2hunter2");
    assert_eq!(once, "login [REDACTED:db-password-prod]");
    assert_eq!(r.redact(&once), once);
    assert!(matches!(
        r.redact("[REDACTED:db-password-prod]"),
        Cow::Borrowed(_)
    ));
    // Outside a marker the same value is redacted as usual.
    assert_eq!(r.redact("user db-password-prod"), "user [REDACTED:x]");
}

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
fn value_spelled_like_a_registered_marker_is_kept_as_that_marker() {
    let r = redactor(&[("a", "12345678"), ("b", "[REDACTED:a]")]);
    assert_eq!(r.len(), 1);
    assert!(matches!(r.redact("[REDACTED:a]"), Cow::Borrowed(_)));
    assert_eq!(r.redact("12345678"), "[REDACTED:a]");
}

#[test]
fn values_straddling_markers_converge_and_stay_idempotent() {
    // Pass one leaves "abcdefg[REDACTED:k]"; the first secret then matches across the marker's
    // opening bracket, which a single scan would miss.
    let r = redactor(&[("x", "abcdefg["), ("k", "0123456789")]);
    let (out, n) = r.redact_counting("abcdefg0123456789");
    assert_eq!(out, "[REDACTED:x]REDACTED:k]");
    assert_eq!(n, 2);
    assert_eq!(r.redact(&out), out);
    assert!(!out.contains("abcdefg["));
}

#[test]
fn cascading_straddles_repeat_until_stable() {
    // The value contains the opening of its own marker, so each scan exposes one more match.
    let r = redactor(&[("s", "x[REDACTED:s")]);
    let (out, n) = r.redact_counting("xxxxx[REDACTED:s]");
    assert_eq!(out, "[REDACTED:s]]]]]]");
    assert_eq!(n, 5);
    assert_eq!(r.redact(&out), out);
}

#[test]
fn self_referential_values_are_bounded_to_32_passes() {
    // Cost bound: one match per pass here, so 100 leading x's would take 100 passes.
    let r = redactor(&[("s", "x[REDACTED:s")]);
    let text = format!("{}[REDACTED:s]", "x".repeat(100));
    let (out, n) = r.redact_counting(&text);
    assert_eq!(n, 32);
    assert_eq!(
        out,
        format!("{}[REDACTED:s]{}", "x".repeat(68), "]".repeat(32))
    );
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
