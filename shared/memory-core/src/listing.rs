//! `MemoryListOptions` of the spec (limit, tag; the tag filter widened to `tag`/`anyTag` sets,
//! `tag_filter`) plus the host's cursor, and the page shape of the read API. The host bounds `limit` ("host MAY further bound"): absent means the default, larger
//! values are clamped to `MAX_LIST_LIMIT`, which the capability document advertises.

use serde::Serialize;

use crate::error::{CoreError, StoreError};
use crate::model::{MemoryEntry, StoredEntry};
use crate::ports::{EntryStore, PageQuery};
use crate::tag_filter::TagFilter;
use crate::time::Timestamp;
use memory_guard::MemoryRef;

pub const DEFAULT_LIST_LIMIT: u32 = 50;
pub const MAX_LIST_LIMIT: u32 = 100;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub limit: Option<u32>,
    pub tags: TagFilter,
    pub cursor: Option<String>,
}

impl ListOptions {
    pub fn effective_limit(&self) -> u32 {
        self.limit
            .unwrap_or(DEFAULT_LIST_LIMIT)
            .clamp(1, MAX_LIST_LIMIT)
    }
}

/// Parses a `limit` query value: a plain positive decimal. Zero, signs, blanks and non-digits
/// are rejected; values too large for any integer type are simply clamped like other large ones.
pub fn parse_limit(raw: &str) -> Result<u32, CoreError> {
    if raw.is_empty() || raw.len() > 64 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CoreError::BadLimit);
    }
    if raw.bytes().all(|b| b == b'0') {
        return Err(CoreError::BadLimit);
    }
    Ok(raw
        .parse::<u64>()
        .map_or(MAX_LIST_LIMIT, |n| n.min(u64::from(MAX_LIST_LIMIT)) as u32))
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPage {
    pub entries: Vec<MemoryEntry>,
    /// Always present on the wire (`null` on the last page) so clients need no key check.
    pub next_cursor: Option<String>,
}

/// Items a snapshot page examines (DynamoDB caps a page at 1 MB anyway).
const SNAPSHOT_PAGE: u32 = 500;

/// Every live entry of one ref, read page by page with read-your-writes consistency.
pub async fn snapshot(
    store: &dyn EntryStore,
    memory_ref: &MemoryRef,
    now: Timestamp,
) -> Result<Vec<StoredEntry>, StoreError> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_page(
                memory_ref,
                &PageQuery {
                    limit: SNAPSHOT_PAGE,
                    after: after.take(),
                    now,
                },
            )
            .await?;
        out.extend(
            page.entries
                .into_iter()
                .filter(|e| e.memory_ref == *memory_ref && e.entry.is_live_at(now)),
        );
        match page.next_after {
            Some(next) => after = Some(next),
            None => return Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_parsing() {
        assert_eq!(parse_limit("1"), Ok(1));
        assert_eq!(parse_limit("100"), Ok(100));
        assert_eq!(parse_limit("101"), Ok(MAX_LIST_LIMIT));
        assert_eq!(
            parse_limit("99999999999999999999999999"),
            Ok(MAX_LIST_LIMIT)
        );
        for bad in ["", "0", "000", "-1", "+5", "ten", "1.5", " 5", "5 ", "0x10"] {
            assert_eq!(parse_limit(bad), Err(CoreError::BadLimit), "{bad:?}");
        }
    }

    #[test]
    fn default_and_clamp() {
        assert_eq!(ListOptions::default().effective_limit(), DEFAULT_LIST_LIMIT);
        let big = ListOptions {
            limit: Some(10_000),
            ..Default::default()
        };
        assert_eq!(big.effective_limit(), MAX_LIST_LIMIT);
    }

    #[test]
    fn next_cursor_is_always_serialized() {
        let v = serde_json::to_value(ListPage::default()).unwrap();
        assert!(v.get("nextCursor").is_some_and(|c| c.is_null()));
    }
}
