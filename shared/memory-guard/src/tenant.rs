//! The tenant gate — CTI-1 §2 of the OpenWOP agent-memory spec.
//!
//! CTI-1 §2 requires each adapter instance to gate by inspecting the ref shape rather than trusting
//! the store: a store shared between tenants will happily return tenant B's entries for a
//! tenant-B-shaped key. [`TenantScope`] is that gate. It is built from the caller's tenant (the
//! authorizer claim, or the request on direct invokes) and answers `None` for anything it must
//! not serve, so handlers map `None` straight to `[]` / `null` without a distinguishable error.

use crate::{MemoryRef, TenantId};

/// The caller's tenant, used to decide which memoryRefs may be resolved at all.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TenantScope {
    tenant: TenantId,
}

impl TenantScope {
    /// Scopes all later admissions to `tenant`.
    pub fn new(tenant: TenantId) -> Self {
        Self { tenant }
    }

    /// The tenant this scope serves.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// Returns the parsed ref only when it is well-formed and names this scope's tenant.
    ///
    /// Malformed and foreign refs both yield `None`, deliberately indistinguishable, so a probe
    /// learns nothing about whether another tenant exists or holds data.
    pub fn admit(&self, raw_ref: &str) -> Option<MemoryRef> {
        let parsed = MemoryRef::parse(raw_ref).ok()?;
        self.admits(&parsed).then_some(parsed)
    }

    /// The same gate for a ref parsed elsewhere (e.g. carried in a cursor or a queued pass), so
    /// no code path can skip the tenant comparison just because the ref is already typed.
    pub fn admit_ref<'r>(&self, memory_ref: &'r MemoryRef) -> Option<&'r MemoryRef> {
        self.admits(memory_ref).then_some(memory_ref)
    }

    /// Whether `memory_ref` belongs to this scope's tenant.
    pub fn admits(&self, memory_ref: &MemoryRef) -> bool {
        memory_ref.tenant() == &self.tenant
    }
}
