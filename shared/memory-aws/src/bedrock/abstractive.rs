//! The `AbstractiveModel` port over Amazon Bedrock's Converse API (docs/dreams.md "Abstractive
//! dreams (optional)"): one model-agnostic request shape for every text model Bedrock serves, so
//! the model is a setting (`ABSTRACTIVE_MODEL_ID`), not code. Temperature 0 and a system prompt
//! that asks for the facts given and nothing else; the dream distrusts the answer anyway
//! (re-redaction, recount, fallback). Errors carry the operation and a code only: neither the facts
//! sent nor the answer ever reach a log line or an error.

use async_trait::async_trait;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, InferenceConfiguration, Message, StopReason, SystemContentBlock,
};
use aws_sdk_bedrockruntime::Client;
use memory_core::ports::{AbstractiveModel, AbstractiveRequest};
use memory_core::StoreError;

use crate::error::backend;

const OP: &str = "converse";

/// The instructions every request carries. Why each rule: markers stand for secrets and must
/// survive whole (SR-1 carry-forward), numbers and names are what later runs look up, and an
/// invented fact in long-term memory is worse than a long summary.
pub const SYSTEM_PROMPT: &str = "You condense the long-term memory of an AI agent. \
You are given facts, grouped under headings, most important first; (xN) means N notes stated it. \
Rewrite them as a shorter summary in Markdown: keep the headings, one fact per line starting \
with \"- \", most important first, merge facts that say the same thing. Keep every number, date, \
name and identifier exactly as written. Copy every [REDACTED:...] marker exactly as written and \
never guess what it hides. Add nothing the facts do not state. Answer with the summary only.";

/// The user message: the facts under their section headings (sections in the order of their
/// best-ranked fact, facts in rank order), and the size asked for.
pub(crate) fn prompt(request: &AbstractiveRequest) -> String {
    let mut sections: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, fact) in request.facts.iter().enumerate() {
        match sections.iter_mut().find(|(name, _)| *name == fact.section) {
            Some((_, members)) => members.push(i),
            None => sections.push((&fact.section, vec![i])),
        }
    }
    let mut out = format!(
        "Summarise these {} facts in at most {} tokens.\n",
        request.facts.len(),
        request.max_output_tokens
    );
    for (name, members) in sections {
        out.push_str("\n## ");
        out.push_str(name);
        out.push('\n');
        for i in members {
            let fact = &request.facts[i];
            out.push_str("- ");
            out.push_str(&fact.text);
            if fact.weight > 1 {
                out.push_str(&format!(" (x{})", fact.weight));
            }
            out.push('\n');
        }
    }
    out
}

fn build_error() -> StoreError {
    StoreError::Backend {
        op: OP,
        code: "BuildRequest".into(),
    }
}

pub struct BedrockAbstractiveModel {
    client: Client,
    model: String,
}

impl BedrockAbstractiveModel {
    pub fn new(client: Client, model: String) -> Self {
        BedrockAbstractiveModel { client, model }
    }
}

#[async_trait]
impl AbstractiveModel for BedrockAbstractiveModel {
    fn model(&self) -> &str {
        &self.model
    }

    async fn rewrite(&self, request: &AbstractiveRequest) -> Result<String, StoreError> {
        let message = Message::builder()
            .role(ConversationRole::User)
            .content(ContentBlock::Text(prompt(request)))
            .build()
            .map_err(|_| build_error())?;
        let config = InferenceConfiguration::builder()
            .max_tokens(i32::try_from(request.max_output_tokens.max(1)).unwrap_or(i32::MAX))
            .temperature(0.0)
            .build();
        let out = crate::retry::send(OP, || {
            self.client
                .converse()
                .model_id(&self.model)
                .system(SystemContentBlock::Text(SYSTEM_PROMPT.to_owned()))
                .messages(message.clone())
                .inference_config(config.clone())
                .send()
        })
        .await
        .map_err(|e| backend(OP, &e))?;
        // Metered as the tenant's Bedrock tokens, whatever the stop reason: they were billed.
        if let Some(usage) = out.usage() {
            memory_core::metering::bedrock_tokens(u64::try_from(usage.total_tokens()).unwrap_or(0));
        }
        // Only a finished answer is a summary: one cut at the token limit, filtered or refused
        // would be stored as if it were the whole memory.
        match out.stop_reason() {
            StopReason::EndTurn | StopReason::StopSequence => {}
            other => {
                return Err(StoreError::Backend {
                    op: OP,
                    code: format!("StopReason:{}", stop_code(other)),
                })
            }
        }
        let text: String = out
            .output()
            .and_then(|o| o.as_message().ok())
            .map(|m| {
                m.content()
                    .iter()
                    .filter_map(|block| block.as_text().ok())
                    .map(String::as_str)
                    .collect()
            })
            .unwrap_or_default();
        Ok(text)
    }
}

/// The stop reason's wire name, bounded: an unknown value comes from the service, not from
/// content, but a log line should not carry an unbounded string either.
fn stop_code(reason: &StopReason) -> String {
    reason.as_str().chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ports::AbstractiveFact;

    fn fact(section: &str, text: &str, weight: u32) -> AbstractiveFact {
        AbstractiveFact {
            section: section.into(),
            text: text.into(),
            weight,
        }
    }

    #[test]
    fn prompt_groups_by_section_in_rank_order() {
        let request = AbstractiveRequest {
            facts: vec![
                fact("preference", "Prefers email", 3),
                fact("(untagged)", "Order 48213 shipped late", 1),
                fact("preference", "Key is [REDACTED:db]", 1),
            ],
            max_output_tokens: 512,
        };
        assert_eq!(
            prompt(&request),
            "Summarise these 3 facts in at most 512 tokens.\n\
             \n## preference\n- Prefers email (x3)\n- Key is [REDACTED:db]\n\
             \n## (untagged)\n- Order 48213 shipped late\n"
        );
    }

    #[test]
    fn stop_codes_are_bounded() {
        assert_eq!(stop_code(&StopReason::MaxTokens), "max_tokens");
        let long = StopReason::from("x".repeat(500).as_str());
        assert_eq!(stop_code(&long).len(), 40);
    }
}
