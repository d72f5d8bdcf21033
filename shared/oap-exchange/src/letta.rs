//! Moving in from Letta: the memory blocks of a Letta agent file (`.af`), the format Letta
//! exports an agent in. Both shapes in use are read: the current one (`agents[]` naming
//! `block_ids` into a top-level `blocks[]`, plus any inline `memory_blocks`) and the earlier one
//! (one agent object with `core_memory[]`). Only blocks are taken: messages, tools and model
//! settings are the agent, not its memory (docs/oap.md "Export and import").

use serde_json::Value;

use crate::error::ExchangeError;
use memory_core::Timestamp;

/// One memory block: whose agent, its label and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub agent: String,
    pub block_id: String,
    pub label: String,
    pub value: String,
}

fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

fn block_of(agent: &str, b: &Value, index: usize) -> Option<Block> {
    let value = text(b, "value")?.trim();
    if value.is_empty() {
        return None;
    }
    Some(Block {
        agent: agent.to_owned(),
        block_id: text(b, "id").map_or_else(|| format!("inline-{index}"), str::to_owned),
        label: text(b, "label").unwrap_or("block").to_owned(),
        value: value.to_owned(),
    })
}

/// The memory blocks of an agent file, in file order, each once.
pub fn blocks(af: &Value) -> Result<Vec<Block>, ExchangeError> {
    let not_af = || {
        ExchangeError::invalid(
            "letta_agent_file",
            "a Letta agent file: {agents, blocks} or an agent with core_memory",
        )
    };
    let mut out: Vec<Block> = Vec::new();
    if let Some(agents) = af.get("agents").and_then(Value::as_array) {
        let shared = af
            .get("blocks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for agent in agents {
            let name = text(agent, "name").or(text(agent, "id")).unwrap_or("agent");
            for id in agent
                .get("block_ids")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let found = shared
                    .iter()
                    .enumerate()
                    .find(|(_, b)| b.get("id") == Some(id));
                if let Some(block) = found.and_then(|(i, b)| block_of(name, b, i)) {
                    out.push(block);
                }
            }
            for (i, b) in agent
                .get("memory_blocks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                out.extend(block_of(name, b, i));
            }
        }
    } else if let Some(core) = af.get("core_memory").and_then(Value::as_array) {
        let name = text(af, "name").unwrap_or("agent");
        for (i, b) in core.iter().enumerate() {
            out.extend(block_of(name, b, i));
        }
    } else {
        return Err(not_af());
    }
    out.dedup_by(|a, b| a.agent == b.agent && a.block_id == b.block_id);
    Ok(out)
}

/// When the file's memory was last known: its `created_at`, else its newest message, else
/// `None` (the import then uses a fixed instant, so ids stay the same on every import).
pub fn captured_at(af: &Value) -> Option<Timestamp> {
    let stamp = |v: &Value| {
        text(v, "created_at")
            .or(text(v, "updated_at"))
            .and_then(|t| Timestamp::parse_rfc3339(t).ok())
    };
    if let Some(t) = stamp(af) {
        return Some(t);
    }
    af.get("agents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|a| {
            a.get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .chain(
            af.get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        )
        .filter_map(stamp)
        .max()
}

/// A tag naming a block's label: the label's characters outside the tag rules dropped.
pub fn label_tag(label: &str) -> String {
    let clean: String = label
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    format!(
        "letta-block:{}",
        if clean.is_empty() { "block" } else { &clean }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn current_and_earlier_files_give_their_blocks() {
        let current = json!({
            "agents": [{"id": "agent-0", "name": "memgpt_agent", "block_ids": ["block-0", "block-1"],
                        "memory_blocks": [], "messages": [{"created_at": "2025-11-21T03:05:34.027937+00:00"}]}],
            "blocks": [
                {"id": "block-0", "label": "human", "value": "\nFirst name: Chad\n"},
                {"id": "block-1", "label": "persona", "value": "I am Sam."},
                {"id": "block-2", "label": "unused", "value": "not this agent's"}
            ]
        });
        let got = blocks(&current).unwrap();
        assert_eq!(
            got.iter()
                .map(|b| (b.label.as_str(), b.value.as_str()))
                .collect::<Vec<_>>(),
            [("human", "First name: Chad"), ("persona", "I am Sam.")]
        );
        assert_eq!(
            captured_at(&current).map(|t| t.to_rfc3339()).as_deref(),
            Some("2025-11-21T03:05:34.027Z")
        );
        let earlier = json!({"name": "old", "core_memory": [{"label": "human", "value": "Likes tea"}, {"label": "x", "value": "  "}]});
        assert_eq!(blocks(&earlier).unwrap().len(), 1);
        assert!(blocks(&json!({"tools": []})).is_err());
    }
}
