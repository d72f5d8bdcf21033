//! Forget reaches exported bundles (OAP RFC 0010 §6, docs/oap.md "Deletion across grants"):
//! grants read the memory as it is, so they need nothing; a bundle is a copy, so every bundle
//! that held the subject is deleted (every version of its object), and the tenant's receipt log
//! gets a `memory.forget` receipt naming those bundles. Exports index their bundles under the
//! subjects' digests in the index forget already reads, so finding them costs one Query.

use std::sync::Arc;

use async_trait::async_trait;

use crate::store::{ExchangeStore, ForgetNotice};
use memory_core::events::ForgetCounts;
use memory_core::forget::{ForgetHook, ForgetScope};
use memory_core::ports::{ArchiveStore, Clock, ObjectKey};
use memory_core::CoreError;

pub struct BundleForgetHook {
    pub store: Arc<dyn ExchangeStore>,
    pub archives: Arc<dyn ArchiveStore>,
    pub clock: Arc<dyn Clock>,
}

#[async_trait]
impl ForgetHook for BundleForgetHook {
    /// The notice is written before anything is deleted and its id is fixed by the subject and
    /// the bundles, so a forget that fails halfway and runs again writes the same notice, not a
    /// second one, and still names every bundle it deleted.
    async fn forget(&self, scope: ForgetScope<'_>) -> Result<ForgetCounts, CoreError> {
        let subject = scope.subject;
        let tenant = subject.tenant();
        let holding = self.store.bundles_holding(subject).await?;
        if holding.is_empty() {
            return Ok(ForgetCounts::default());
        }
        let mut bundles: Vec<String> = holding.iter().map(|h| h.bundle_id.clone()).collect();
        bundles.sort();
        bundles.dedup();
        let id_source = format!("{}\0{}", subject.as_str(), bundles.join(","));
        let notice = ForgetNotice {
            notice_id: crate::canonical::sha256_hex(&id_source)[..32].to_owned(),
            bundles,
            at: self.clock.now(),
        };
        self.store.add_notice(tenant, &notice).await?;
        for h in &holding {
            if let Some(key) = ObjectKey::from_listed(tenant, &h.object) {
                self.archives.delete(&key).await?;
            }
            self.store.unindex_bundle(&h.bundle_id, subject).await?;
        }
        tracing::info!(bundles = holding.len(), "forget deleted exported bundles");
        Ok(ForgetCounts {
            deleted_archives: holding.len(),
            ..ForgetCounts::default()
        })
    }
}
