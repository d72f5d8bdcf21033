//! Per-tenant quotas (docs/quotas.md "Quotas"): the limits, the counters that measure them, the
//! check a write carries to the store as data, and the refusal.
//!
//! A quota is enforced by the store write itself, never by reading a counter first: the check is
//! a list of [`Charge`]s (add `delta` to a counter, only if the counter stays at or below its
//! maximum), and the adapter turns each into a conditional `ADD` in the same all-or-nothing write
//! as the entries. Two writers racing for the last unit of a quota can therefore never both get
//! it. Every counter is a per-tenant item, so a tenant at its limit touches nothing another
//! tenant's write needs.

use std::collections::BTreeMap;
use std::fmt;

use memory_guard::{MemoryRef, TenantId};

use crate::model::StoredEntry;
use crate::time::Timestamp;

/// How long a process may keep a tenant's limits (its override item included) before reading
/// them again: an operator's change takes effect within this, without a redeploy.
pub const LIMITS_CACHE_MILLIS: i64 = 60_000;

/// The share of a limit at and above which an accepted request reports pressure
/// (`QuotaNearLimit`), in percent.
pub const NEAR_LIMIT_PERCENT: u64 = 80;

/// How long per-minute counters are kept after their minute ends (DynamoDB TTL deletes them).
const MINUTE_COUNTER_KEEP_MILLIS: i64 = 60 * 60 * 1000;

/// How long daily token counters are kept after their day ends.
const DAY_COUNTER_KEEP_MILLIS: i64 = 2 * 24 * 60 * 60 * 1000;

const MINUTE_MILLIS: i64 = 60_000;
const DAY_MILLIS: i64 = 24 * 60 * 60 * 1000;

/// One quota. Its [`Quota::name`] is the template parameter, the environment variable and the
/// attribute of a tenant's override item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Quota {
    EntriesPerRef,
    BytesPerTenant,
    WritesPerMinute,
    SearchesPerMinute,
    BedrockTokensPerDay,
}

impl Quota {
    pub const ALL: [Quota; 5] = [
        Quota::EntriesPerRef,
        Quota::BytesPerTenant,
        Quota::WritesPerMinute,
        Quota::SearchesPerMinute,
        Quota::BedrockTokensPerDay,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Quota::EntriesPerRef => "MaxEntriesPerRef",
            Quota::BytesPerTenant => "MaxBytesPerTenant",
            Quota::WritesPerMinute => "MaxWritesPerMinute",
            Quota::SearchesPerMinute => "MaxSearchesPerMinute",
            Quota::BedrockTokensPerDay => "MaxBedrockTokensPerDay",
        }
    }

    pub fn parse(name: &str) -> Option<Quota> {
        Quota::ALL.into_iter().find(|q| q.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The limits that apply to one tenant. `None` is unlimited; a configured 0 means unlimited too
/// (a template parameter cannot be absent), so no configuration refuses every write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    max: [Option<u64>; 5],
}

/// A limit's value that is not a whole number (named, never echoed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0} must be a whole number (0 = unlimited)")]
pub struct BadLimit(pub &'static str);

impl Limits {
    /// No quota at all.
    pub fn unlimited() -> Self {
        Limits::default()
    }

    pub fn get(&self, quota: Quota) -> Option<u64> {
        self.max[quota.index()]
    }

    /// `quota`'s limit as a [`Charge`] carries it: `None` when unlimited.
    pub fn bound(&self, quota: Quota) -> Option<(Quota, u64)> {
        self.get(quota).map(|max| (quota, max))
    }

    /// These limits with `quota` set to `max` (0 = unlimited).
    pub fn with(mut self, quota: Quota, max: u64) -> Self {
        self.max[quota.index()] = (max > 0).then_some(max);
        self
    }

    /// The deployment's defaults, from variables named like the quotas (`lookup` is the
    /// environment in production). An absent or empty variable is unlimited.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Limits, BadLimit> {
        let mut limits = Limits::unlimited();
        for quota in Quota::ALL {
            let Some(raw) = lookup(quota.name()).filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            let max = raw
                .trim()
                .parse::<u64>()
                .map_err(|_| BadLimit(quota.name()))?;
            limits = limits.with(quota, max);
        }
        Ok(limits)
    }

    /// These limits with a tenant's override applied: each named quota takes the override's
    /// value (0 = unlimited for that tenant); unnamed ones keep the default.
    pub fn overridden(self, overrides: &[(Quota, u64)]) -> Limits {
        overrides
            .iter()
            .fold(self, |limits, (quota, max)| limits.with(*quota, *max))
    }

    pub fn is_unlimited(&self) -> bool {
        self.max.iter().all(Option::is_none)
    }
}

/// A counter of one tenant (or one of its refs). The adapter decides where it lives; its
/// identity is all the core needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// Entries one ref stores now.
    RefEntries(MemoryRef),
    /// Bytes of entry content one ref stores now: not limited itself, kept so a recount of one
    /// ref can correct the tenant's bytes by the difference.
    RefBytes(MemoryRef),
    /// Entries the tenant stores now, across its refs.
    TenantEntries(TenantId),
    /// Bytes of entry content the tenant stores now.
    TenantBytes(TenantId),
    /// Write requests in one minute (minutes since the epoch).
    Writes(TenantId, i64),
    /// Searches in one minute (minutes since the epoch).
    Searches(TenantId, i64),
    /// Bedrock tokens in one UTC day (`yyyy-mm-dd`).
    Tokens(TenantId, String),
    /// Entries the OpenIntent door's keyed store holds in one of the tenant's partitions (an
    /// agent's id, or `@semantic`), limited like a ref's entries: a scope of their own, so the
    /// recount of a ref's entries never resets the door's (docs/quotas.md "The OpenIntent door").
    KeyedEntries(TenantId, String),
    /// The value bytes of the same scope's keyed entries: not limited itself, kept so a recount
    /// of the scope can correct the tenant's bytes by the difference.
    KeyedBytes(TenantId, String),
}

impl Counter {
    pub fn tenant(&self) -> &TenantId {
        match self {
            Counter::RefEntries(r) | Counter::RefBytes(r) => r.tenant(),
            Counter::TenantEntries(t)
            | Counter::TenantBytes(t)
            | Counter::Writes(t, _)
            | Counter::Searches(t, _)
            | Counter::Tokens(t, _)
            | Counter::KeyedEntries(t, _)
            | Counter::KeyedBytes(t, _) => t,
        }
    }

    /// The sort key of the counter's item: `Q#entries`, `Q#bytes`, `Q#writes#{epochMinute}`,
    /// `Q#searches#{epochMinute}`, `Q#tokens#{yyyy-mm-dd}`, `Q#kentries` (docs/quotas.md
    /// "Counters").
    pub fn sort_key(&self) -> String {
        match self {
            Counter::RefEntries(_) | Counter::TenantEntries(_) => "Q#entries".to_owned(),
            Counter::RefBytes(_) | Counter::TenantBytes(_) => "Q#bytes".to_owned(),
            Counter::Writes(_, minute) => format!("Q#writes#{minute}"),
            Counter::Searches(_, minute) => format!("Q#searches#{minute}"),
            Counter::Tokens(_, day) => format!("Q#tokens#{day}"),
            Counter::KeyedEntries(..) => "Q#kentries".to_owned(),
            Counter::KeyedBytes(..) => "Q#kbytes".to_owned(),
        }
    }

    /// When the counter's item may be deleted (windowed counters only): stored totals live on.
    pub fn expires_at(&self) -> Option<Timestamp> {
        match self {
            Counter::Writes(_, minute) | Counter::Searches(_, minute) => Some(
                Timestamp::from_millis((minute + 1) * MINUTE_MILLIS + MINUTE_COUNTER_KEEP_MILLIS),
            ),
            Counter::Tokens(_, day) => Timestamp::parse_rfc3339(&format!("{day}T00:00:00Z"))
                .ok()
                .map(|start| start.plus_millis(DAY_MILLIS + DAY_COUNTER_KEEP_MILLIS)),
            _ => None,
        }
    }
}

/// The minute `at` falls in, as minutes since the epoch.
pub fn epoch_minute(at: Timestamp) -> i64 {
    at.as_millis().div_euclid(MINUTE_MILLIS)
}

/// The UTC day `at` falls in, `yyyy-mm-dd`.
pub fn utc_day(at: Timestamp) -> String {
    at.to_rfc3339().chars().take(10).collect()
}

/// Add `delta` to `counter`; when `limit` is set and `delta` is positive, only if the counter
/// stays at or below the limit (the write fails whole otherwise). Negative deltas (deletes)
/// are never refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Charge {
    pub counter: Counter,
    pub delta: i64,
    pub limit: Option<(Quota, u64)>,
}

impl Charge {
    /// The highest value the counter may hold before the charge for it to apply, when the charge
    /// is conditional: `max - delta`, negative when the charge alone is over the limit. A charge
    /// of nothing (an admission probe) asks for the counter to be below the limit.
    pub fn room(&self) -> Option<i64> {
        let max = i64::try_from(self.limit?.1).unwrap_or(i64::MAX);
        match self.delta {
            d if d > 0 => Some(max.saturating_sub(d)),
            0 => Some(max - 1),
            _ => None,
        }
    }
}

/// Everything a write charges, in the order the adapter writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaCheck {
    pub charges: Vec<Charge>,
    /// The instant of the write, which chose the windowed counters (and the retry hint).
    pub at: Option<Timestamp>,
}

impl QuotaCheck {
    /// The stored counters of a put that no limit refuses (a dream's output, an import): kept on
    /// every put, so every store that keeps counters moves them the same way on that path.
    pub fn unconditional(entries: &[StoredEntry]) -> Self {
        QuotaCheck {
            charges: stored_charges(entries, &[], None),
            at: None,
        }
    }

    /// The charges of one put request of new entries (all of one tenant): per ref, its entries;
    /// per tenant, entries and content bytes, and one write when writes per minute are limited.
    /// The stored counters are charged whether or not a limit applies, so they are right the day
    /// a limit is set.
    pub fn for_put(limits: &Limits, entries: &[StoredEntry], now: Timestamp) -> QuotaCheck {
        QuotaCheck::for_rewrite(limits, entries, &[], now)
    }

    /// The charges of a user's rewrite (a memory tool edit): `put` replaces `removed`, and only
    /// what grows is conditional, so an edit that shrinks a file is never refused.
    pub fn for_rewrite(
        limits: &Limits,
        put: &[StoredEntry],
        removed: &[StoredEntry],
        now: Timestamp,
    ) -> QuotaCheck {
        let mut charges = stored_charges(put, removed, Some(limits));
        let tenant = put
            .iter()
            .chain(removed)
            .next()
            .map(|e| e.memory_ref.tenant());
        if let (Some(tenant), Some(max)) = (tenant, limits.get(Quota::WritesPerMinute)) {
            charges.push(Charge {
                counter: Counter::Writes(tenant.clone(), epoch_minute(now)),
                delta: 1,
                limit: Some((Quota::WritesPerMinute, max)),
            });
        }
        QuotaCheck {
            charges,
            at: Some(now),
        }
    }

    /// The charge of one search by `tenant` at `now`.
    pub fn for_search(limits: &Limits, tenant: &TenantId, now: Timestamp) -> QuotaCheck {
        QuotaCheck::one(
            Charge {
                counter: Counter::Searches(tenant.clone(), epoch_minute(now)),
                delta: 1,
                limit: limits.bound(Quota::SearchesPerMinute),
            },
            now,
        )
    }

    /// The charge of `tokens` Bedrock tokens spent by `tenant` at `now`. Tokens are known only
    /// once the model answered, so this charge is recorded unconditionally; the limit is
    /// enforced by [`QuotaCheck::before_tokens`] before the next call.
    pub fn for_tokens(tenant: &TenantId, tokens: u64, now: Timestamp) -> QuotaCheck {
        QuotaCheck::one(
            Charge {
                counter: Counter::Tokens(tenant.clone(), utc_day(now)),
                delta: i64::try_from(tokens).unwrap_or(i64::MAX),
                limit: None,
            },
            now,
        )
    }

    /// The admission check before a Bedrock call: a charge of nothing that fails once the
    /// day's tokens reached the limit (the counter must be below it).
    pub fn before_tokens(limits: &Limits, tenant: &TenantId, now: Timestamp) -> QuotaCheck {
        QuotaCheck::one(
            Charge {
                counter: Counter::Tokens(tenant.clone(), utc_day(now)),
                delta: 0,
                limit: limits.bound(Quota::BedrockTokensPerDay),
            },
            now,
        )
    }

    /// A check of the one windowed `charge` at `now`.
    fn one(charge: Charge, now: Timestamp) -> QuotaCheck {
        QuotaCheck {
            charges: vec![charge],
            at: Some(now),
        }
    }

    /// Whether any charge is conditional.
    pub fn is_limited(&self) -> bool {
        self.charges.iter().any(|c| c.room().is_some())
    }

    /// The charges that can refuse, with their limits: what a caller reads back to report
    /// pressure.
    pub fn limited(&self) -> impl Iterator<Item = (&Counter, Quota, u64)> {
        self.charges.iter().filter_map(|c| {
            c.limit
                .filter(|_| c.room().is_some())
                .map(|(q, m)| (&c.counter, q, m))
        })
    }
}

/// Net changes of the stored counters when `put` are written and `removed` deleted (all of one
/// tenant or not): per ref, entries; per tenant, entries and content bytes. With `limits`, the
/// increases are conditional (a user's put); without, unconditional (deletes, forget, and the
/// background rewrites, which keep or shrink what is stored and are never refused).
pub fn stored_charges(
    put: &[StoredEntry],
    removed: &[StoredEntry],
    limits: Option<&Limits>,
) -> Vec<Charge> {
    let mut per_ref: BTreeMap<&MemoryRef, (i64, i64)> = BTreeMap::new();
    let mut per_tenant: BTreeMap<&TenantId, (i64, i64)> = BTreeMap::new();
    for (entries, sign) in [(put, 1i64), (removed, -1i64)] {
        for e in entries {
            let r = per_ref.entry(&e.memory_ref).or_default();
            r.0 += sign;
            r.1 += sign * content_bytes(e);
            let t = per_tenant.entry(e.memory_ref.tenant()).or_default();
            t.0 += sign;
            t.1 += sign * content_bytes(e);
        }
    }
    let limit = |q: Quota| limits.and_then(|l| l.bound(q));
    let mut charges = Vec::new();
    for (r, (entries, bytes)) in per_ref {
        if entries != 0 {
            charges.push(Charge {
                counter: Counter::RefEntries(r.clone()),
                delta: entries,
                limit: limit(Quota::EntriesPerRef),
            });
        }
        if bytes != 0 {
            charges.push(Charge {
                counter: Counter::RefBytes(r.clone()),
                delta: bytes,
                limit: None,
            });
        }
    }
    for (t, (entries, bytes)) in per_tenant {
        if entries != 0 {
            charges.push(Charge {
                counter: Counter::TenantEntries(t.clone()),
                delta: entries,
                limit: None,
            });
        }
        if bytes != 0 {
            charges.push(Charge {
                counter: Counter::TenantBytes(t.clone()),
                delta: bytes,
                limit: limit(Quota::BytesPerTenant),
            });
        }
    }
    charges
}

/// What a recount of one ref found against what its counters said when the recount began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recount {
    pub memory_ref: MemoryRef,
    /// The ref's `(entries, bytes)` counters as read before the listing: the fence. The repair
    /// applies only if they still hold these values, so a write or delete that landed meanwhile
    /// (and moved them) makes the repair a no-op until the next pass.
    pub seen: (i64, i64),
    /// The live entries and their content bytes the listing found.
    pub counted: (i64, i64),
}

impl Recount {
    /// Whether the counters are off.
    pub fn is_off(&self) -> bool {
        self.seen != self.counted
    }
}

/// Recounts one ref's live entries (expired ones excluded, as DynamoDB's TTL will delete them)
/// and repairs its counters and, by the difference, its tenant's. Run by the background passes
/// after their own work; a failure is theirs to log, not to fail on.
pub async fn recount(
    store: &dyn crate::ports::EntryStore,
    quotas: &dyn crate::ports::QuotaStore,
    memory_ref: &MemoryRef,
    now: Timestamp,
) -> Result<Option<Recount>, crate::error::StoreError> {
    let counters = [
        Counter::RefEntries(memory_ref.clone()),
        Counter::RefBytes(memory_ref.clone()),
    ];
    let before = quotas.counters_consistent(&counters).await?;
    let value = |c: &Counter| before.iter().find(|(x, _)| x == c).map_or(0, |(_, v)| *v);
    let seen = (value(&counters[0]), value(&counters[1]));
    let mut counted = (0i64, 0i64);
    let mut after = None;
    loop {
        let page = store
            .list_page(
                memory_ref,
                &crate::ports::PageQuery {
                    limit: crate::listing::MAX_LIST_LIMIT,
                    after: after.take(),
                    now,
                },
            )
            .await?;
        for e in &page.entries {
            counted.0 += 1;
            counted.1 += content_bytes(e);
        }
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let recount = Recount {
        memory_ref: memory_ref.clone(),
        seen,
        counted,
    };
    if !recount.is_off() {
        return Ok(None);
    }
    Ok(quotas.repair(&recount).await?.then_some(recount))
}

/// The bytes an entry counts for against `MaxBytesPerTenant`: its content as stored (after
/// redaction), in UTF-8.
pub fn content_bytes(e: &StoredEntry) -> i64 {
    i64::try_from(e.entry.content.len()).unwrap_or(i64::MAX)
}

/// A request refused by a quota: which one, the counter's value and the limit (numbers only),
/// and when a retry may succeed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("quota {quota} reached: {current} of at most {max}{per}", per = per(*quota))]
pub struct Refusal {
    /// Not in the message: for the refusal metric.
    pub tenant: TenantId,
    pub quota: Quota,
    pub current: u64,
    pub max: u64,
    pub retry_after_seconds: u32,
}

fn per(quota: Quota) -> &'static str {
    match quota {
        Quota::EntriesPerRef => " entries in this memoryRef",
        Quota::BytesPerTenant => " bytes of content stored by the tenant",
        Quota::WritesPerMinute => " writes this minute",
        Quota::SearchesPerMinute => " searches this minute",
        Quota::BedrockTokensPerDay => " Bedrock tokens today (UTC)",
    }
}

impl Refusal {
    /// The refusal of `charge`, whose counter held `current` when its condition failed. Windowed
    /// quotas may be retried when the window turns; stored ones when something is deleted or
    /// the limit raised, which takes effect within the limits' cache period.
    pub fn of(charge: &Charge, current: u64, at: Timestamp) -> Option<Refusal> {
        let (quota, max) = charge.limit?;
        let ms = at.as_millis();
        let retry_after_ms = match quota {
            Quota::WritesPerMinute | Quota::SearchesPerMinute => {
                MINUTE_MILLIS - ms.rem_euclid(MINUTE_MILLIS)
            }
            Quota::BedrockTokensPerDay => DAY_MILLIS - ms.rem_euclid(DAY_MILLIS),
            Quota::EntriesPerRef | Quota::BytesPerTenant => LIMITS_CACHE_MILLIS,
        };
        let seconds = (retry_after_ms + 999) / 1000;
        Some(Refusal {
            tenant: charge.counter.tenant().clone(),
            quota,
            current,
            max,
            retry_after_seconds: u32::try_from(seconds.max(1)).unwrap_or(u32::MAX),
        })
    }
}

/// A counter an accepted request left at or above [`NEAR_LIMIT_PERCENT`] of its limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pressure {
    pub tenant: TenantId,
    pub quota: Quota,
    pub current: u64,
    pub max: u64,
}

/// Whether `current` is at or above [`NEAR_LIMIT_PERCENT`] of `max`.
pub fn near_limit(current: u64, max: u64) -> bool {
    max > 0 && u128::from(current) * 100 >= u128::from(max) * u128::from(NEAR_LIMIT_PERCENT)
}

/// The pressure a check's limited counters are under, given their values after the write.
pub fn pressure(check: &QuotaCheck, values: &[(Counter, i64)]) -> Vec<Pressure> {
    check
        .limited()
        .filter_map(|(counter, quota, max)| {
            let current = values.iter().find(|(c, _)| c == counter)?.1;
            let current = u64::try_from(current).unwrap_or(0);
            near_limit(current, max).then(|| Pressure {
                tenant: counter.tenant().clone(),
                quota,
                current,
                max,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attribution, MemoryEntry, Tier};

    fn entry(agent: &str, id: &str, content: &str) -> StoredEntry {
        StoredEntry {
            memory_ref: MemoryRef::parse(&format!("workspaces/t1/agents/{agent}/memories"))
                .expect("ref"),
            entry: MemoryEntry {
                id: id.into(),
                content: content.into(),
                tags: vec![],
                created_at: Timestamp::from_millis(0),
                expires_at: None,
            },
            tier: Tier::Transactional,
            subject: None,
            attribution: Attribution::default(),
            provenance: vec![],
            embedding: None,
        }
    }

    fn tenant() -> TenantId {
        TenantId::parse("t1").expect("tenant")
    }

    /// 2026-11-27T18:00:30Z.
    const AT: Timestamp = Timestamp::from_millis(1_795_802_430_000);

    #[test]
    fn limits_come_from_variables_and_zero_or_absent_is_unlimited() {
        let env = |name: &str| match name {
            "MaxEntriesPerRef" => Some("10".to_owned()),
            "MaxBytesPerTenant" => Some("0".to_owned()),
            "MaxWritesPerMinute" => Some(" ".to_owned()),
            _ => None,
        };
        let limits = Limits::from_lookup(env).expect("limits");
        assert_eq!(limits.get(Quota::EntriesPerRef), Some(10));
        assert_eq!(limits.get(Quota::BytesPerTenant), None);
        assert_eq!(limits.get(Quota::WritesPerMinute), None);
        assert_eq!(limits.get(Quota::SearchesPerMinute), None);
        let bad = Limits::from_lookup(|n| (n == "MaxSearchesPerMinute").then(|| "-1".to_owned()));
        assert_eq!(bad, Err(BadLimit("MaxSearchesPerMinute")));
    }

    #[test]
    fn an_override_replaces_only_the_quotas_it_names() {
        let defaults = Limits::unlimited()
            .with(Quota::EntriesPerRef, 10)
            .with(Quota::WritesPerMinute, 5);
        let limits = defaults.overridden(&[(Quota::EntriesPerRef, 0), (Quota::BytesPerTenant, 7)]);
        assert_eq!(limits.get(Quota::EntriesPerRef), None, "0 lifts the limit");
        assert_eq!(limits.get(Quota::BytesPerTenant), Some(7));
        assert_eq!(limits.get(Quota::WritesPerMinute), Some(5));
        assert!(!limits.is_unlimited());
        assert!(Limits::unlimited().is_unlimited());
        for q in Quota::ALL {
            assert_eq!(Quota::parse(q.name()), Some(q));
        }
    }

    #[test]
    fn a_put_charges_entries_per_ref_bytes_and_one_write() {
        let limits = Limits::unlimited()
            .with(Quota::EntriesPerRef, 10)
            .with(Quota::BytesPerTenant, 100)
            .with(Quota::WritesPerMinute, 3);
        let entries = [
            entry("a1", "1", "abc"),
            entry("a1", "2", "de"),
            entry("a2", "3", "ü"),
        ];
        let check = QuotaCheck::for_put(&limits, &entries, AT);
        let by = |c: &Counter| check.charges.iter().find(|x| &x.counter == c).cloned();
        let a1 = entries[0].memory_ref.clone();
        let ref_charge = by(&Counter::RefEntries(a1)).expect("ref charge");
        assert_eq!((ref_charge.delta, ref_charge.room()), (2, Some(8)));
        let bytes = by(&Counter::TenantBytes(tenant())).expect("bytes");
        assert_eq!((bytes.delta, bytes.room()), (7, Some(93)), "UTF-8 bytes");
        let entries_now = by(&Counter::TenantEntries(tenant())).expect("entries");
        assert_eq!((entries_now.delta, entries_now.room()), (3, None));
        let writes = by(&Counter::Writes(tenant(), epoch_minute(AT))).expect("writes");
        assert_eq!((writes.delta, writes.room()), (1, Some(2)));
        assert_eq!(check.limited().count(), 4, "two refs, bytes, writes");
        // Unlimited: the stored counters are still charged, without conditions, and no write.
        let free = QuotaCheck::for_put(&Limits::unlimited(), &entries, AT);
        assert!(!free.is_limited());
        assert_eq!(
            free.charges.len(),
            6,
            "two refs' entries and bytes, the tenant's two"
        );
    }

    #[test]
    fn a_charge_larger_than_the_limit_has_negative_room() {
        let limits = Limits::unlimited().with(Quota::BytesPerTenant, 2);
        let check = QuotaCheck::for_put(&limits, &[entry("a1", "1", "abcd")], AT);
        let bytes = check
            .charges
            .iter()
            .find(|c| matches!(c.counter, Counter::TenantBytes(_)))
            .expect("bytes");
        assert_eq!(bytes.room(), Some(-2));
    }

    #[test]
    fn rewrites_and_deletes_charge_net_changes_and_never_refuse_a_shrink() {
        let limits = Limits::unlimited().with(Quota::BytesPerTenant, 10);
        let old = entry("a1", "1", "abcdef");
        let new = entry("a1", "2", "abc");
        let check = QuotaCheck::for_rewrite(
            &limits,
            std::slice::from_ref(&new),
            std::slice::from_ref(&old),
            AT,
        );
        assert_eq!(check.charges.len(), 2, "entries unchanged: {check:?}");
        assert!(check.charges.iter().all(|c| c.delta == -3));
        assert!(
            check.charges.iter().all(|c| c.room().is_none()),
            "a shrink is unconditional"
        );
        let gone = stored_charges(&[], &[old, new], None);
        assert_eq!(
            gone.iter().map(|c| c.delta).collect::<Vec<_>>(),
            vec![-2, -9, -2, -9]
        );
    }

    #[test]
    fn windows_expire_and_refusals_say_when_to_retry() {
        let writes = Counter::Writes(tenant(), epoch_minute(AT));
        assert_eq!(writes.sort_key(), format!("Q#writes#{}", epoch_minute(AT)));
        assert_eq!(
            writes.expires_at(),
            Some(Timestamp::from_millis(
                (epoch_minute(AT) + 1) * 60_000 + 3_600_000
            ))
        );
        let tokens = Counter::Tokens(tenant(), utc_day(AT));
        assert_eq!(tokens.sort_key(), "Q#tokens#2026-11-27");
        assert!(tokens.expires_at().is_some());
        assert_eq!(Counter::TenantBytes(tenant()).expires_at(), None);

        let charge = Charge {
            counter: writes,
            delta: 1,
            limit: Some((Quota::WritesPerMinute, 5)),
        };
        let refusal = Refusal::of(&charge, 5, AT).expect("refusal");
        assert_eq!(refusal.retry_after_seconds, 30, "the minute turns in 30 s");
        assert_eq!(
            refusal.to_string(),
            "quota MaxWritesPerMinute reached: 5 of at most 5 writes this minute"
        );
        let stored = Charge {
            counter: Counter::RefEntries(entry("a1", "1", "x").memory_ref),
            delta: 1,
            limit: Some((Quota::EntriesPerRef, 3)),
        };
        assert_eq!(
            Refusal::of(&stored, 3, AT).map(|r| r.retry_after_seconds),
            Some(60)
        );
        let unlimited = Charge {
            limit: None,
            ..stored
        };
        assert_eq!(Refusal::of(&unlimited, 3, AT), None);
    }

    #[test]
    fn token_admission_asks_for_room_below_the_limit() {
        let limits = Limits::unlimited().with(Quota::BedrockTokensPerDay, 1000);
        let probe = QuotaCheck::before_tokens(&limits, &tenant(), AT);
        assert_eq!(probe.charges[0].delta, 0);
        assert_eq!(probe.charges[0].room(), Some(999));
        let spent = QuotaCheck::for_tokens(&tenant(), 250, AT);
        assert_eq!(spent.charges[0].delta, 250);
        assert_eq!(
            spent.charges[0].room(),
            None,
            "spent tokens are recorded, not refused"
        );
    }

    #[test]
    fn pressure_starts_at_eighty_percent() {
        assert!(!near_limit(79, 100));
        assert!(near_limit(80, 100));
        assert!(near_limit(4, 5));
        assert!(!near_limit(3, 5));
        assert!(!near_limit(10, 0));
        let limits = Limits::unlimited().with(Quota::EntriesPerRef, 10);
        let e = entry("a1", "1", "x");
        let check = QuotaCheck::for_put(&limits, std::slice::from_ref(&e), AT);
        let under = pressure(&check, &[(Counter::RefEntries(e.memory_ref.clone()), 7)]);
        assert!(under.is_empty());
        let over = pressure(&check, &[(Counter::RefEntries(e.memory_ref.clone()), 8)]);
        assert_eq!(
            over,
            vec![Pressure {
                tenant: tenant(),
                quota: Quota::EntriesPerRef,
                current: 8,
                max: 10
            }]
        );
    }
}
