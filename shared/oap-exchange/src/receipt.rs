//! The receipt log of a tenant (OAP-CORE-1.0 §19 as `oap-sdk` 0.1.0 writes it; RFC 0010 asks
//! for grants, revocations and queries to be accountable): every grant, revocation and query
//! appends one signed receipt, each naming the hash of the one before, so a granter (or an
//! auditor) can verify the whole log with the SDK's own functions and see that nothing was
//! removed or reordered.
//!
//! The shape is the SDK's `_persist_receipt`: the core fields, `signatures` (Ed25519 over the
//! canonical core), then `self_hash`, the hash of the canonical receipt with its signatures. The
//! store appends a receipt only if the log's tip is still the `previous_receipt_hash` it names
//! (one conditional write), so two concurrent appends can never fork the log: the loser rebuilds
//! its receipt on the new tip.

use serde_json::{json, Value};

use crate::canonical::hash_of;
use crate::signing::HostKey;
use memory_core::Timestamp;

/// `previous_receipt_hash` of a log's first receipt, as in the SDK.
pub const GENESIS: &str = "genesis";

/// What a receipt records; hashes only, never content.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceiptFacts {
    /// `memory.grant`, `memory.revoke` or `memory.query`.
    pub receipt_type: &'static str,
    /// The granter (the tenant's DID).
    pub principal_did: String,
    /// The grantee.
    pub agent_did: String,
    /// `oap.memory.grant`, ...
    pub action_id: &'static str,
    pub input: Value,
    pub output: Value,
    /// The rule that decided, e.g. `oap.memory.grant.valid`.
    pub rule: &'static str,
    pub outcome: &'static str,
}

/// The position of a log's tip: the next receipt's sequence number and the hash it must name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tip {
    pub seq: u64,
    pub hash: String,
}

impl Tip {
    pub fn genesis() -> Self {
        Tip {
            seq: 0,
            hash: GENESIS.to_owned(),
        }
    }
}

/// A receipt ready to append at `tip`.
#[derive(Clone, Debug, PartialEq)]
pub struct Receipt {
    pub seq: u64,
    pub body: Value,
    pub self_hash: String,
}

/// Builds and signs the receipt of `facts` on top of `tip`.
pub fn build(
    key: &HostKey,
    facts: &ReceiptFacts,
    tip: &Tip,
    receipt_id: &str,
    now: Timestamp,
) -> Receipt {
    let core = json!({
        "receipt_id": format!("urn:oap:receipt:{receipt_id}"),
        "type": facts.receipt_type,
        "timestamp": now.to_rfc3339(),
        "principal_did": facts.principal_did,
        "agent_did": facts.agent_did,
        "tool_did": key.did(),
        "action_id": facts.action_id,
        "input_hash": hash_of(&facts.input),
        "output_hash": hash_of(&facts.output),
        "cost": {"amount": "0", "currency": "USD"},
        "policy_decisions": [{
            "id": format!("pol_{receipt_id}"),
            "outcome": facts.outcome,
            "rules": [facts.rule],
        }],
        "previous_receipt_hash": tip.hash,
    });
    let signature = key.sign(&core);
    let mut body = core;
    body["signatures"] = json!([{"by": key.key_id(), "alg": "EdDSA", "value": signature}]);
    let self_hash = hash_of(&body);
    body["self_hash"] = json!(self_hash);
    Receipt {
        seq: tip.seq,
        body,
        self_hash,
    }
}

impl Receipt {
    /// The tip after this receipt.
    pub fn next_tip(&self) -> Tip {
        Tip {
            seq: self.seq + 1,
            hash: self.self_hash.clone(),
        }
    }
}

/// Verifies a log read back in order: each receipt's signature, its `self_hash`, and its link to
/// the one before. The index of the first bad receipt, if any. (The grantee-side check is the
/// SDK's; this one guards our own tests and the export's manifest.)
pub fn first_broken(key: &HostKey, receipts: &[Value]) -> Option<usize> {
    let mut prev = GENESIS.to_owned();
    for (i, r) in receipts.iter().enumerate() {
        let mut core = r.clone();
        let (Some(map), Some(self_hash)) = (
            core.as_object_mut(),
            r.get("self_hash").and_then(Value::as_str),
        ) else {
            return Some(i);
        };
        map.remove("self_hash");
        let with_sigs = Value::Object(map.clone());
        let sig = map.remove("signatures").and_then(|s| {
            s.get(0)
                .and_then(|s| s.get("value"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let core = Value::Object(map.clone());
        let linked =
            core.get("previous_receipt_hash").and_then(Value::as_str) == Some(prev.as_str());
        if !linked
            || hash_of(&with_sigs) != self_hash
            || !sig.is_some_and(|s| key.verifies(&core, &s))
        {
            return Some(i);
        }
        prev = self_hash.to_owned();
    }
    None
}
