//! The door's entries and bytes under the host's stored quotas (docs/quotas.md "The OpenIntent
//! door"): every keyed entry counts one in its partition's `KeyedEntries` counter (limited by
//! `MaxEntriesPerRef`) and the bytes of its value in the tenant's bytes (limited by
//! `MaxBytesPerTenant`, shared with the OpenWOP entries). The charges go into the store's own
//! transaction of the insert, update or removal, as conditional counter updates: never a read
//! followed by a write.

use memory_core::quota::{Charge, Counter, Limits, Quota};

use crate::model::{Home, StoredIntent};

/// The bytes an entry counts for against `MaxBytesPerTenant`: its value as stored (redacted),
/// serialised, the measure §1.3's size bound uses.
pub fn value_bytes(e: &StoredIntent) -> i64 {
    serde_json::to_vec(&e.entry.value)
        .map(|b| i64::try_from(b.len()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The name of a partition's quota scope: the agent's id, or `@semantic`.
pub fn scope(home: &Home) -> String {
    match home {
        Home::Agent(agent) => agent.as_str().to_owned(),
        Home::Semantic => "@semantic".to_owned(),
    }
}

/// The counter of the entries of `e`'s partition.
pub fn entries_counter(e: &StoredIntent) -> Counter {
    Counter::KeyedEntries(e.tenant.clone(), scope(&e.home()))
}

/// A recount of one partition's keyed entries: its `(entries, bytes)` counters as read before
/// the listing (the fence), and what the listing found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeRecount {
    pub tenant: memory_guard::TenantId,
    pub home: Home,
    pub seen: (i64, i64),
    pub counted: (i64, i64),
}

/// The net charges of writing `put` and removing `removed` (one tenant). With `limits`, the
/// increases are conditional (a caller's create or update); without, unconditional (removals,
/// which are never refused). Counters that do not move are left out: a transaction names each
/// counter at most once.
pub fn charges(
    put: Option<&StoredIntent>,
    removed: Option<&StoredIntent>,
    limits: Option<&Limits>,
) -> Vec<Charge> {
    let Some(any) = put.or(removed) else {
        return Vec::new();
    };
    let limit = |q: Quota| limits.and_then(|l| l.get(q)).map(|m| (q, m));
    let mut entries: Vec<(Counter, i64)> = Vec::with_capacity(2);
    let mut add = |c: Counter, d: i64| match entries.iter_mut().find(|(x, _)| *x == c) {
        Some((_, n)) => *n += d,
        None => entries.push((c, d)),
    };
    if let Some(p) = put {
        add(entries_counter(p), 1);
    }
    if let Some(r) = removed {
        add(entries_counter(r), -1);
    }
    let bytes = put.map_or(0, value_bytes) - removed.map_or(0, value_bytes);
    let mut out: Vec<Charge> = entries
        .into_iter()
        .filter(|(_, d)| *d != 0)
        .map(|(counter, delta)| Charge {
            counter,
            delta,
            limit: limit(Quota::EntriesPerRef),
        })
        .collect();
    if bytes != 0 {
        out.push(Charge {
            counter: Counter::KeyedBytes(any.tenant.clone(), scope(&any.home())),
            delta: bytes,
            limit: None,
        });
        out.push(Charge {
            counter: Counter::TenantBytes(any.tenant.clone()),
            delta: bytes,
            limit: limit(Quota::BytesPerTenant),
        });
    }
    out
}

/// What removing `e` gives back.
pub fn released(e: &StoredIntent) -> Vec<Charge> {
    charges(None, Some(e), None)
}
