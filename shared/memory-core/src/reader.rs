//! The read side of `MemoryAdapter` (list/get) with CTI-1 enforced here, in the core, by
//! inspecting the ref's shape against the caller's tenant before any store call (CTI-1 §1-2),
//! and the TTL rule applied to whatever the store returns (spec §TTL semantics). The store is
//! trusted for nothing: results are re-checked for ref, tags and expiry. Tag-filtered pages
//! walk the store's tag postings (`tag_filter`).

use std::sync::Arc;

use crate::cursor;
use crate::error::CoreError;
use crate::listing::{ListOptions, ListPage};
use crate::model::{is_valid_entry_id, EntryKey, MemoryEntry};
use crate::ports::{ArchiveStore, Clock, Embedder, EntryStore, PageQuery, QuotaStore};
use crate::ref_index::IndexReader;
use crate::tag_filter::tagged_page;
use memory_guard::TenantScope;
use text_search::TermCache;

#[derive(Clone)]
pub struct MemoryReader {
    store: Arc<dyn EntryStore>,
    clock: Arc<dyn Clock>,
    embedder: Option<Arc<dyn Embedder>>,
    /// Entries' analyses kept across searches of a warm function (`text_search::cache`).
    terms: Arc<TermCache>,
    /// The refs' search indexes, when the function can read them (docs/search.md "The index").
    index: Option<Arc<IndexReader>>,
    /// Where searches are counted against the tenant's quota; without it they are not.
    quotas: Option<Arc<dyn QuotaStore>>,
}

impl MemoryReader {
    pub fn new(store: Arc<dyn EntryStore>, clock: Arc<dyn Clock>) -> Self {
        MemoryReader {
            store,
            clock,
            embedder: None,
            terms: Arc::default(),
            index: None,
            quotas: None,
        }
    }

    /// Counts every search against the tenant's searches per minute (docs/quotas.md "Quotas").
    pub fn with_quotas(mut self, quotas: Option<Arc<dyn QuotaStore>>) -> Self {
        self.quotas = quotas;
        self
    }

    /// Charges one search of `tenant` at `now` (a conditional add on the minute's counter, so
    /// concurrent searches never overshoot); the pressure it left.
    pub(crate) async fn charge_search(
        &self,
        tenant: &memory_guard::TenantId,
        now: crate::time::Timestamp,
    ) -> Result<Vec<crate::quota::Pressure>, CoreError> {
        let Some(quotas) = &self.quotas else {
            return Ok(Vec::new());
        };
        let limits = quotas.limits(tenant).await?;
        // Unlimited: nothing to count (the metering of searches is not a quota's job).
        if limits.get(crate::quota::Quota::SearchesPerMinute).is_none() {
            return Ok(Vec::new());
        }
        let check = crate::quota::QuotaCheck::for_search(&limits, tenant, now);
        let values = quotas.charge(&check).await?;
        Ok(crate::quota::pressure(&check, &values))
    }

    /// Searches read each ref's index from `archive` where one exists.
    pub fn with_index(mut self, archive: Option<Arc<dyn ArchiveStore>>) -> Self {
        self.index = archive.map(|a| Arc::new(IndexReader::new(a)));
        self
    }

    pub(crate) fn index(&self) -> Option<&IndexReader> {
        self.index.as_deref()
    }

    pub(crate) fn term_cache(&self) -> &TermCache {
        &self.terms
    }

    /// Semantic and hybrid search embed the query with `embedder` (the writer's model).
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    pub(crate) fn embedder(&self) -> Option<&dyn Embedder> {
        self.embedder.as_deref()
    }

    pub(crate) fn store(&self) -> &dyn EntryStore {
        &*self.store
    }

    /// The reader's clock's instant (the usage route's notion of today).
    pub fn now(&self) -> crate::time::Timestamp {
        self.clock.now()
    }

    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    /// `[]` for a malformed or foreign ref, whatever the store holds. A cursor that was not
    /// minted for this tenant and ref is a client error (400), not an empty page.
    pub async fn list(
        &self,
        scope: &TenantScope,
        raw_ref: &str,
        options: &ListOptions,
    ) -> Result<ListPage, CoreError> {
        let Some(memory_ref) = scope.admit(raw_ref) else {
            return Ok(ListPage::default());
        };
        let filter = &options.tags;
        let after = match &options.cursor {
            Some(token) => Some(cursor::decode(&memory_ref, filter, token)?),
            None => None,
        };
        let now = self.clock.now();
        let limit = options.effective_limit();
        let page = if filter.is_empty() {
            let query = PageQuery { limit, after, now };
            self.store.list_page(&memory_ref, &query).await?
        } else {
            tagged_page(&*self.store, &memory_ref, filter, after, limit, now).await?
        };
        let entries = page
            .entries
            .into_iter()
            .filter(|s| s.memory_ref == memory_ref)
            .filter(|s| s.entry.is_live_at(now))
            .filter(|s| filter.admits(&s.entry.tags))
            .map(|s| s.entry)
            .collect();
        Ok(ListPage {
            entries,
            next_cursor: page
                .next_after
                .map(|position| cursor::encode(&memory_ref, filter, &position)),
        })
    }

    /// `None` for a malformed or foreign ref, a malformed id, a missing or an expired entry.
    pub async fn get(
        &self,
        scope: &TenantScope,
        raw_ref: &str,
        id: &str,
    ) -> Result<Option<MemoryEntry>, CoreError> {
        let Some(memory_ref) = scope.admit(raw_ref) else {
            return Ok(None);
        };
        if !is_valid_entry_id(id) {
            return Ok(None);
        }
        let key = EntryKey {
            memory_ref: memory_ref.clone(),
            id: id.to_owned(),
        };
        let now = self.clock.now();
        Ok(self
            .store
            .get(&key)
            .await?
            .filter(|s| s.memory_ref == memory_ref && s.entry.id == id)
            .filter(|s| s.entry.is_live_at(now))
            .map(|s| s.entry))
    }
}
