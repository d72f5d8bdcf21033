//! CTI-1 §1: only the canonical memoryRef spelling resolves; every malformed ref is refused both
//! by the parser and by the tenant gate.

use memory_guard::{
    AgentId, GuardError, MemoryRef, TenantId, TenantScope, MAX_ID_BYTES, MAX_REF_BYTES,
};

const VALID: &str = "workspaces/acme/agents/planner/memories";

fn acme_scope() -> TenantScope {
    TenantScope::new(TenantId::parse("acme").unwrap())
}

#[test]
fn valid_refs_parse_and_round_trip() {
    let cases = [
        VALID,
        "workspaces/a/agents/b/memories",
        "workspaces/Tenant_01.prod-eu/agents/Agent-7_x.y/memories",
        "workspaces/.hidden/agents/.../memories",
        "workspaces/0/agents/-/memories",
    ];
    for raw in cases {
        let parsed = MemoryRef::parse(raw).unwrap_or_else(|_| panic!("should parse: {raw}"));
        assert_eq!(parsed.to_string(), raw);
        assert_eq!(parsed.as_string(), raw);
        assert_eq!(raw.parse::<MemoryRef>().unwrap(), parsed);
        assert_eq!(MemoryRef::try_from(raw).unwrap(), parsed);
        let rebuilt = MemoryRef::new(parsed.tenant().clone(), parsed.agent().clone());
        assert_eq!(rebuilt, parsed);
    }
    let r = MemoryRef::parse(VALID).unwrap();
    assert_eq!(r.tenant().as_str(), "acme");
    assert_eq!(r.agent().as_str(), "planner");
}

#[test]
fn new_builds_the_canonical_form() {
    let r = MemoryRef::new(
        TenantId::parse("t1").unwrap(),
        AgentId::parse("a1").unwrap(),
    );
    assert_eq!(r.to_string(), "workspaces/t1/agents/a1/memories");
    assert_eq!(MemoryRef::parse(&r.as_string()).unwrap(), r);
}

#[test]
fn id_bounds_are_exact() {
    let max = "x".repeat(MAX_ID_BYTES);
    let over = "x".repeat(MAX_ID_BYTES + 1);
    assert!(TenantId::parse(&max).is_ok());
    assert!(AgentId::parse(&max).is_ok());
    assert_eq!(TenantId::parse(&over), Err(GuardError::InvalidId));
    assert_eq!(AgentId::parse(&over), Err(GuardError::InvalidId));

    let longest = format!("workspaces/{max}/agents/{max}/memories");
    assert_eq!(longest.len(), 284);
    assert!(MemoryRef::parse(&longest).is_ok());
    assert!(MemoryRef::parse(&format!("workspaces/{over}/agents/a/memories")).is_err());
    assert!(MemoryRef::parse(&format!("workspaces/a/agents/{over}/memories")).is_err());
}

#[test]
fn oversize_refs_are_rejected() {
    // No well-formed ref exceeds 284 bytes, so oversize input is necessarily malformed; these
    // assert the bound holds at and far beyond the limit.
    let pad = |n: usize| {
        let base = "workspaces/acme/agents/planner/memories";
        let mut s = base.to_owned();
        s.push_str(&"/x".repeat((n - base.len()) / 2));
        if s.len() < n {
            s.push('y');
        }
        s
    };
    let at_limit_plus_one = pad(MAX_REF_BYTES + 1);
    assert_eq!(at_limit_plus_one.len(), 513);
    assert_eq!(
        MemoryRef::parse(&at_limit_plus_one),
        Err(GuardError::MalformedRef)
    );
    let huge = format!("workspaces/acme/agents/{}/memories", "a".repeat(1 << 20));
    assert_eq!(MemoryRef::parse(&huge), Err(GuardError::MalformedRef));
    assert!(acme_scope().admit(&at_limit_plus_one).is_none());
    assert!(acme_scope().admit(&huge).is_none());
}

#[test]
fn invalid_ids_are_rejected() {
    for raw in [
        "", ".", "..", "a/b", "a b", " a", "a\0", "é", "a%2e", "a\\b", "a:b", "a@b", "ａ",
    ] {
        assert_eq!(TenantId::parse(raw), Err(GuardError::InvalidId), "{raw:?}");
        assert_eq!(AgentId::parse(raw), Err(GuardError::InvalidId), "{raw:?}");
    }
    assert!(
        TenantId::parse("...").is_ok(),
        "only . and .. are path-special"
    );
}

fn malformed_corpus() -> Vec<(&'static str, String)> {
    let mut c: Vec<(&'static str, String)> = vec![
        // traversal and dot segments
        (
            "dotdot tenant",
            "workspaces/../agents/planner/memories".into(),
        ),
        ("dotdot agent", "workspaces/acme/agents/../memories".into()),
        ("dot tenant", "workspaces/./agents/planner/memories".into()),
        ("dot agent", "workspaces/acme/agents/./memories".into()),
        (
            "dotdot hop",
            "workspaces/acme/../acme/agents/planner/memories".into(),
        ),
        (
            "dotdot suffix",
            "workspaces/acme/agents/planner/memories/../../../b".into(),
        ),
        // percent-encoding
        (
            "pct dotdot",
            "workspaces/%2e%2e/agents/planner/memories".into(),
        ),
        (
            "pct dotdot upper",
            "workspaces/%2E%2E/agents/planner/memories".into(),
        ),
        (
            "pct slash",
            "workspaces/acme%2Fagents/planner/memories".into(),
        ),
        (
            "pct slash lower",
            "workspaces/acme/agents/planner%2fx/memories".into(),
        ),
        (
            "pct nul",
            "workspaces/acme/agents/planner%00/memories".into(),
        ),
        (
            "double pct",
            "workspaces/%252e%252e/agents/planner/memories".into(),
        ),
        (
            "pct literal",
            "%77orkspaces/acme/agents/planner/memories".into(),
        ),
        // NUL and control characters
        (
            "nul in tenant",
            "workspaces/acme\0/agents/planner/memories".into(),
        ),
        (
            "nul at end",
            "workspaces/acme/agents/planner/memories\0".into(),
        ),
        ("nul alone", "\0".into()),
        ("soh", "workspaces/ac\x01me/agents/planner/memories".into()),
        ("esc", "workspaces/acme/agents/\x1bplanner/memories".into()),
        ("del", "workspaces/acme/agents/planner\x7f/memories".into()),
        (
            "c1 control",
            "workspaces/acme/agents/planner\u{85}/memories".into(),
        ),
        // empty segments
        ("empty", String::new()),
        ("slash only", "/".into()),
        ("slashes only", "////".into()),
        ("empty tenant", "workspaces//agents/planner/memories".into()),
        ("empty agent", "workspaces/acme/agents//memories".into()),
        (
            "doubled slash",
            "workspaces/acme//agents/planner/memories".into(),
        ),
        // leading / trailing slashes
        (
            "leading slash",
            "/workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "double leading",
            "//workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "trailing slash",
            "workspaces/acme/agents/planner/memories/".into(),
        ),
        // unicode look-alikes and other encodings
        (
            "cyrillic a",
            "workspаces/acme/agents/planner/memories".into(),
        ),
        (
            "cyrillic tenant",
            "workspaces/аcme/agents/planner/memories".into(),
        ),
        (
            "fullwidth slash",
            "workspaces／acme/agents/planner/memories".into(),
        ),
        (
            "division slash",
            "workspaces∕acme/agents/planner/memories".into(),
        ),
        (
            "fullwidth tenant",
            "workspaces/ａｃｍｅ/agents/planner/memories".into(),
        ),
        (
            "zero width space",
            "workspaces/ac\u{200b}me/agents/planner/memories".into(),
        ),
        (
            "bom prefix",
            "\u{feff}workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "combining dot",
            "workspaces/acme\u{307}/agents/planner/memories".into(),
        ),
        (
            "overlong-ish dot",
            "workspaces/\u{2024}\u{2024}/agents/planner/memories".into(),
        ),
        // other schemes and URL syntax
        (
            "mem scheme",
            "mem://workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "s3 scheme",
            "s3://bucket/workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "file scheme",
            "file:///workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "https",
            "https://host/workspaces/acme/agents/planner/memories".into(),
        ),
        ("urn", "urn:workspaces/acme/agents/planner/memories".into()),
        (
            "query",
            "workspaces/acme/agents/planner/memories?x=1".into(),
        ),
        (
            "fragment",
            "workspaces/acme/agents/planner/memories#f".into(),
        ),
        (
            "matrix",
            "workspaces/acme;v=1/agents/planner/memories".into(),
        ),
        (
            "colon sep",
            "workspaces:acme:agents:planner:memories".into(),
        ),
        // whitespace anywhere, never trimmed
        (
            "leading space",
            " workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "trailing space",
            "workspaces/acme/agents/planner/memories ".into(),
        ),
        (
            "inner space",
            "workspaces/ac me/agents/planner/memories".into(),
        ),
        (
            "space around slash",
            "workspaces/acme /agents/planner/memories".into(),
        ),
        ("tab", "workspaces/acme/agents/planner\t/memories".into()),
        (
            "leading tab",
            "\tworkspaces/acme/agents/planner/memories".into(),
        ),
        (
            "newline",
            "workspaces/acme/agents/planner/memories\n".into(),
        ),
        ("crlf", "workspaces/acme\r\n/agents/planner/memories".into()),
        (
            "nbsp",
            "workspaces/acme\u{a0}/agents/planner/memories".into(),
        ),
        // backslashes
        (
            "all backslashes",
            "workspaces\\acme\\agents\\planner\\memories".into(),
        ),
        (
            "one backslash",
            "workspaces/acme\\agents/planner/memories".into(),
        ),
        (
            "backslash in id",
            "workspaces/ac\\me/agents/planner/memories".into(),
        ),
        (
            "backslash traversal",
            "workspaces/..\\acme/agents/planner/memories".into(),
        ),
        // wrong literal segments (case-sensitive, exact)
        (
            "Workspaces",
            "Workspaces/acme/agents/planner/memories".into(),
        ),
        (
            "WORKSPACES",
            "WORKSPACES/acme/agents/planner/memories".into(),
        ),
        ("Agents", "workspaces/acme/Agents/planner/memories".into()),
        ("Memories", "workspaces/acme/agents/planner/Memories".into()),
        (
            "singular workspace",
            "workspace/acme/agents/planner/memories".into(),
        ),
        (
            "singular memory",
            "workspaces/acme/agents/planner/memory".into(),
        ),
        (
            "tenants literal",
            "tenants/acme/agents/planner/memories".into(),
        ),
        // extra and missing segments
        (
            "extra tail",
            "workspaces/acme/agents/planner/memories/extra".into(),
        ),
        (
            "extra middle",
            "workspaces/acme/agents/planner/sub/memories".into(),
        ),
        (
            "extra head",
            "x/workspaces/acme/agents/planner/memories".into(),
        ),
        ("missing memories", "workspaces/acme/agents/planner".into()),
        ("tenant only", "workspaces/acme".into()),
        ("missing agent", "workspaces/acme/memories".into()),
        ("missing workspace", "agents/planner/memories".into()),
        (
            "missing tenant",
            "workspaces/agents/planner/memories".into(),
        ),
        ("bare literal", "workspaces".into()),
    ];
    c.push((
        "513 bytes",
        format!("workspaces/acme/agents/planner/memories{}", "/".repeat(474)),
    ));
    c
}

#[test]
fn malformed_corpus_is_rejected_by_parser_and_gate() {
    // Positive control: the gate admits the well-formed ref of its own tenant, so the rejections
    // below are caused by malformation and not by a gate that refuses everything.
    let scope = acme_scope();
    assert_eq!(scope.admit(VALID), Some(MemoryRef::parse(VALID).unwrap()));

    let corpus = malformed_corpus();
    assert!(corpus.len() > 70);
    for (name, raw) in &corpus {
        assert_eq!(
            MemoryRef::parse(raw),
            Err(GuardError::MalformedRef),
            "{name} must be rejected"
        );
        assert!(raw.parse::<MemoryRef>().is_err(), "{name}");
        assert_eq!(scope.admit(raw), None, "{name} must not be admitted");
    }
}

#[test]
fn errors_never_echo_the_input() {
    let probe = "workspaces/SENTINEL-/agents/../memories";
    let err = MemoryRef::parse(probe).unwrap_err();
    assert!(!err.to_string().contains("SENTINEL"));
    assert!(!format!("{err:?}").contains("SENTINEL"));
    let err = TenantId::parse("SENTINEL/x").unwrap_err();
    assert!(!err.to_string().contains("SENTINEL"));
}

#[test]
fn ids_order_and_hash_by_text() {
    use std::collections::BTreeSet;
    let set: BTreeSet<TenantId> = ["b", "a", "c", "a"]
        .iter()
        .map(|s| TenantId::parse(s).unwrap())
        .collect();
    let ordered: Vec<&str> = set.iter().map(TenantId::as_str).collect();
    assert_eq!(ordered, ["a", "b", "c"]);
    assert_eq!(AgentId::parse("x").unwrap().to_string(), "x");
    assert_ne!(
        TenantId::parse("Acme").unwrap(),
        TenantId::parse("acme").unwrap()
    );
}
