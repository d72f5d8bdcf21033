//! `MaxBedrockTokensPerDay` (docs/quotas.md "Bedrock tokens"): the embedder and the abstractive
//! model behind one decorator that admits a call only while the acting tenant's tokens of the
//! UTC day are below its limit, and charges what the call spent once the model answered.
//!
//! A model counts its tokens only when it answers, so a call cannot be charged before it runs.
//! The admission is a conditional charge of nothing (`n < max`, atomic in the store, never a read
//! then a write), the spending an unconditional add of what the adapter reported
//! ([`crate::metering::counting_tokens`]: the same report the meter gets). The call that crosses
//! the limit completes and is charged in full; every call admitted after its charge landed is
//! refused. Calls admitted concurrently before that charge landed also complete, so the day's
//! counter can pass the limit by what those calls spent, never more.
//!
//! The tenant is the one the task acts for ([`crate::acting_tenant`]); work no tenant asked for is
//! neither admitted nor charged. Every counter is the tenant's own item, so a tenant over its
//! limit is refused without touching anything another tenant's call needs.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use memory_guard::TenantId;

use crate::error::StoreError;
use crate::model::Embedding;
use crate::ports::{AbstractiveModel, AbstractiveRequest, Clock, Embedder, QuotaStore};
use crate::quota::{Quota, QuotaCheck};

/// A model port (`M`: an [`Embedder`] or an [`AbstractiveModel`]) under the tenant's daily token
/// quota. A refused call answers `QuotaExceeded` with the refusal (quota, tokens spent today,
/// the limit, the rest of the UTC day as the retry hint) and never reaches the model.
pub struct TokenQuota<M: ?Sized> {
    inner: Arc<M>,
    quotas: Arc<dyn QuotaStore>,
    clock: Arc<dyn Clock>,
}

impl<M: ?Sized> TokenQuota<M> {
    pub fn new(inner: Arc<M>, quotas: Arc<dyn QuotaStore>, clock: Arc<dyn Clock>) -> Self {
        TokenQuota {
            inner,
            quotas,
            clock,
        }
    }

    /// The tenant to charge, once admitted; `None` when there is no tenant or no token limit
    /// (nothing is counted then: a limit set later starts from that moment's spending).
    async fn admit(&self) -> Result<Option<TenantId>, StoreError> {
        let Some(tenant) = crate::acting_tenant::current() else {
            return Ok(None);
        };
        let limits = self.quotas.limits(&tenant).await?;
        if limits.get(Quota::BedrockTokensPerDay).is_none() {
            return Ok(None);
        }
        let probe = QuotaCheck::before_tokens(&limits, &tenant, self.clock.now());
        self.quotas.charge(&probe).await?;
        Ok(Some(tenant))
    }

    /// Charges what an admitted call spent. The model answered and was billed whatever happens
    /// here: a failed charge is logged (counts only) and the call's answer stands.
    async fn spend(&self, tenant: Option<TenantId>, tokens: u64) {
        let Some(tenant) = tenant.filter(|_| tokens > 0) else {
            return;
        };
        let charge = QuotaCheck::for_tokens(&tenant, tokens, self.clock.now());
        if let Err(e) = self.quotas.charge(&charge).await {
            tracing::warn!(tokens, error = %e, "Bedrock tokens not charged to the quota");
        }
    }

    /// Runs one model `call` under the quota: admitted first (the call is not started when
    /// refused), then charged what it reported spending, its answer passed through.
    async fn within<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let tenant = self.admit().await?;
        let (answer, tokens) = crate::metering::counting_tokens(call).await;
        self.spend(tenant, tokens).await;
        answer
    }
}

#[async_trait]
impl<M: Embedder + ?Sized> Embedder for TokenQuota<M> {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn embed(&self, text: &str) -> Result<Embedding, StoreError> {
        self.within(self.inner.embed(text)).await
    }
}

#[async_trait]
impl<M: AbstractiveModel + ?Sized> AbstractiveModel for TokenQuota<M> {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn rewrite(&self, request: &AbstractiveRequest) -> Result<String, StoreError> {
        self.within(self.inner.rewrite(request)).await
    }
}
