//! The crate's single error type — RFC 0062 run contract §2 (`token_budget_exceeded`) and the
//! design notes' rule that no error carries entry content or secret material.
//!
//! Variants hold numbers and static reasons only: never an entry id, a tag, a memoryRef or a
//! fragment of text, so an error can be logged, returned or put on an event as it is.

/// Everything that can go wrong in distillation, archive and index handling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistillError {
    /// The budget is below [`crate::distiller::MIN_TOKEN_BUDGET`], the fixed overhead of any
    /// summary: a malformed request (`validation_error` on `tokenBudget` at the edge), not a
    /// budget these sources failed to meet, so it is refused before anything is read.
    #[error("token budget must be at least {floor}, the fixed overhead of a summary")]
    BudgetBelowFloor { floor: u32, budget: u32 },
    /// The sources cannot be distilled within the budget: not even the top-ranked fact fits
    /// beside the input tokens of the source it quotes. `needed` is a budget with which the rule
    /// in [`crate::distiller`] takes that fact (and so does every larger one).
    #[error("token budget exceeded: at least {needed} tokens needed, budget is {budget}")]
    TokenBudgetExceeded { needed: u32, budget: u32 },
    /// No sources, or sources whose content holds no fact (blank or punctuation-only lines).
    #[error("nothing to distill")]
    NothingToDistill,
    /// Two sources share an id; a read snapshot never does, so the input is not one.
    #[error("duplicate source entry id")]
    DuplicateSourceId,
    /// The memoryRef is not `workspaces/{tenantId}/agents/{agentId}/memories`.
    #[error("malformed memoryRef")]
    MalformedMemoryRef,
    /// The memoryRef belongs to a tenant other than the one named (CTI-1).
    #[error("memoryRef belongs to another tenant")]
    TenantMismatch,
    /// An archive digest is not 64 lowercase hex digits.
    #[error("malformed archive digest")]
    MalformedDigest,
    /// Stored archive bytes that this version cannot read back.
    #[error("malformed archive document: {0}")]
    MalformedArchive(&'static str),
    /// Stored index bytes that this version cannot read back.
    #[error("malformed memory index: {0}")]
    MalformedIndex(&'static str),
    /// An index line or document was offered to the index of another memoryRef.
    #[error("index belongs to another memoryRef")]
    IndexRefMismatch,
}

impl DistillError {
    /// Stable snake_case code for error envelopes and metrics; `token_budget_exceeded` is the
    /// code rest-endpoints.md fixes for RFC 0062.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BudgetBelowFloor { .. } => "budget_below_floor",
            Self::TokenBudgetExceeded { .. } => "token_budget_exceeded",
            Self::NothingToDistill => "nothing_to_distill",
            Self::DuplicateSourceId => "duplicate_source_id",
            Self::MalformedMemoryRef => "malformed_memory_ref",
            Self::TenantMismatch => "tenant_mismatch",
            Self::MalformedDigest => "malformed_digest",
            Self::MalformedArchive(_) => "malformed_archive",
            Self::MalformedIndex(_) => "malformed_index",
            Self::IndexRefMismatch => "index_ref_mismatch",
        }
    }
}
