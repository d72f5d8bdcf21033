//! CTI-1 §2: a tenant-A gate returns nothing for a tenant-B ref even when the shared store holds
//! tenant B's entries.

use std::collections::HashMap;

use memory_guard::{MemoryRef, TenantId, TenantScope};

const REF_A: &str = "workspaces/tenant-a/agents/planner/memories";
const REF_B: &str = "workspaces/tenant-b/agents/planner/memories";

fn scope(tenant: &str) -> TenantScope {
    TenantScope::new(TenantId::parse(tenant).unwrap())
}

/// A deliberately permissive store shared by every adapter instance: it answers any key.
fn shared_store() -> HashMap<MemoryRef, Vec<&'static str>> {
    let mut store = HashMap::new();
    store.insert(MemoryRef::parse(REF_A).unwrap(), vec!["a-entry"]);
    store.insert(MemoryRef::parse(REF_B).unwrap(), vec!["b-entry"]);
    store
}

/// How an adapter must list: gate first, then look up.
fn gated_list(
    scope: &TenantScope,
    store: &HashMap<MemoryRef, Vec<&'static str>>,
    raw: &str,
) -> Vec<&'static str> {
    scope
        .admit(raw)
        .and_then(|r| store.get(&r).cloned())
        .unwrap_or_default()
}

#[test]
fn tenant_a_scope_admits_own_ref_and_refuses_tenant_b() {
    let a = scope("tenant-a");
    // Positive control first.
    let admitted = a.admit(REF_A).expect("own ref admitted");
    assert_eq!(admitted.tenant().as_str(), "tenant-a");
    assert_eq!(admitted.to_string(), REF_A);

    assert_eq!(a.admit(REF_B), None);
}

#[test]
fn cross_instance_probe_returns_empty_even_though_store_holds_entries() {
    let store = shared_store();
    let a = scope("tenant-a");
    let b = scope("tenant-b");
    // Positive controls: each tenant sees its own entries through the gate.
    assert_eq!(gated_list(&a, &store, REF_A), ["a-entry"]);
    assert_eq!(gated_list(&b, &store, REF_B), ["b-entry"]);
    // The store itself would serve the foreign key...
    assert!(store.contains_key(&MemoryRef::parse(REF_B).unwrap()));
    // ...but the gate does not.
    assert!(gated_list(&a, &store, REF_B).is_empty());
    assert!(gated_list(&b, &store, REF_A).is_empty());
}

#[test]
fn admit_ref_gates_already_parsed_refs() {
    let a = scope("tenant-a");
    let ref_a = MemoryRef::parse(REF_A).unwrap();
    let ref_b = MemoryRef::parse(REF_B).unwrap();
    assert_eq!(a.admit_ref(&ref_a), Some(&ref_a));
    assert!(a.admits(&ref_a));
    assert_eq!(a.admit_ref(&ref_b), None);
    assert!(!a.admits(&ref_b));
}

#[test]
fn near_miss_tenants_are_foreign() {
    let a = scope("acme");
    assert!(a.admit("workspaces/acme/agents/x/memories").is_some());
    for other in [
        "Acme",
        "ACME",
        "acme-evil",
        "acm",
        "acme.",
        ".acme",
        "acme_",
    ] {
        let raw = format!("workspaces/{other}/agents/x/memories");
        assert!(
            MemoryRef::parse(&raw).is_ok(),
            "{other} is itself well-formed"
        );
        assert_eq!(a.admit(&raw), None, "{other} must be foreign to acme");
    }
    assert_eq!(a.tenant().as_str(), "acme");
}
