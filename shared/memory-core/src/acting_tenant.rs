//! The tenant a request acts for, as a task-local value (docs/guarantees.md "Tenant isolation in
//! three layers", layer 3; infra/README-deploy.md "Tenant isolation: what IAM enforces, and what
//! the code enforces").
//!
//! The edge sets it once per request from the tenant it trusts - the verified JWT claim, the
//! direct invoke's `tenantId`, or the queued pass's - before any service code runs. Adapters that
//! vend tenant-scoped credentials read it to choose *whose* credentials sign a data call. It is
//! deliberately not derived from the key a call builds: a key of another tenant that a bug
//! builds is then signed with the acting tenant's credentials, and the backend refuses it.
//!
//! A value that is not a valid tenant id sets nothing; with tenant-scoped credentials on, any
//! data call made outside a scope is refused by the adapter (never sent on the function role).

use std::future::Future;

use memory_guard::TenantId;

tokio::task_local! {
    static ACTING: TenantId;
}

/// Runs `work` acting for `tenant` (when it is a valid tenant id; otherwise with no tenant).
/// The time it takes is metered as the tenant's function time (docs/metering.md "What is
/// measured").
pub async fn acting_for<F: Future>(tenant: Option<&str>, work: F) -> F::Output {
    match tenant.and_then(|t| TenantId::parse(t).ok()) {
        Some(tenant) => {
            let started = std::time::Instant::now();
            ACTING
                .scope(tenant, async move {
                    let out = work.await;
                    crate::metering::acted(started);
                    out
                })
                .await
        }
        None => work.await,
    }
}

/// The tenant the current task acts for, if any. Tasks spawned from a request do not inherit it
/// (tokio task-locals are per task); a request that spawns work for its tenant (the embedding
/// calls of a write or an embed pass) wraps it in [`carried`].
pub fn current() -> Option<TenantId> {
    ACTING.try_with(TenantId::clone).ok()
}

/// `work` acting for the current task's tenant and reporting to its meter, to be spawned: the
/// spawned task's model calls are then the tenant's (its tokens metered and charged to its token
/// quota) like calls made in the request's own task. Its time is not metered again (the
/// request's scope measures the wall time it waits).
pub fn carried<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let tenant = current();
    let meter = crate::metering::current_meter();
    async move {
        let work = crate::metering::within(meter, work);
        match tenant {
            Some(tenant) => ACTING.scope(tenant, work).await,
            None => work.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scope_holds_the_valid_tenant_only_inside() {
        assert_eq!(current(), None);
        let inside = acting_for(Some("acme"), async { current() }).await;
        assert_eq!(inside.as_ref().map(TenantId::as_str), Some("acme"));
        assert_eq!(current(), None);
        for bad in [None, Some(""), Some("a/b"), Some("acme#x")] {
            assert_eq!(acting_for(bad, async { current() }).await, None, "{bad:?}");
        }
        let nested = acting_for(Some("a"), acting_for(Some("b"), async { current() })).await;
        assert_eq!(nested.as_ref().map(TenantId::as_str), Some("b"));
    }

    #[tokio::test]
    async fn a_carried_task_keeps_the_tenant_and_the_meter() {
        let meter = crate::metering::Meter::new();
        let (plain, carried_tenant) = crate::metering::metered(
            &meter,
            acting_for(Some("acme"), async {
                let plain = tokio::spawn(async {
                    crate::metering::bedrock_tokens(5);
                    current()
                });
                let kept = tokio::spawn(carried(async {
                    crate::metering::bedrock_tokens(7);
                    current()
                }));
                (plain.await.ok().flatten(), kept.await.ok().flatten())
            }),
        )
        .await;
        assert_eq!(plain, None, "tokio does not carry task-locals by itself");
        assert_eq!(carried_tenant.as_ref().map(TenantId::as_str), Some("acme"));
        let usage = meter.take();
        let tokens: Vec<_> = usage
            .iter()
            .map(|(to, u)| (to.as_ref().map(|t| t.as_str().to_owned()), u.bedrock_tokens))
            .collect();
        assert_eq!(tokens, vec![(Some("acme".to_owned()), 7)]);
    }
}
