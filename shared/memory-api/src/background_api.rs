//! The three ways a scheduled pass (dream, consolidation, embed) is started, as one command the
//! edge decodes once (`lambda_adapter::pass_command`):
//! - [`PassCommand::FanOut`], the schedule's input `{"action": "fan-out"}` (`"pass": "<kind>"`
//!   picks a kind other than the function's own): queue one pass per pending ref;
//! - [`PassCommand::Queued`], an SQS batch of those queued passes: run each, and answer the failed
//!   ones so only they are retried (and reach the dead-letter queue eventually);
//! - [`PassCommand::Run`], a direct invoke [`RunRef`]: run one ref now and return its result.
//!
//! A function may run more than one kind (memory-dream runs dreams and, with an embedding
//! model, embed passes: docs/search.md "Semantic search"); the first it is wired with is its
//! own, what a trigger that names no kind means.

use async_trait::async_trait;
use memory_core::acting_tenant::acting_for;
use memory_core::background::fan_out;
use memory_core::ports::{EntryStore, PassKind, PassQueue, QueuedPass};
use memory_core::writer::SecretInput;
use memory_core::CoreError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{ref_hash, WireError};

/// A direct invoke of one ref's pass. Unknown fields are ignored, as they always were: the
/// run engine sends the same invoke shape to both passes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRef {
    pub tenant_id: String,
    pub memory_ref: String,
    /// Dreams only: the distilled entry's budget; absent or null means the advertised maximum.
    #[serde(default)]
    pub token_budget: Option<u64>,
    /// The run's BYOK secrets; queued passes carry none and still keep existing markers whole.
    #[serde(default)]
    pub secrets: Vec<SecretInput>,
    /// Which kind of pass to run (`"dream"`, `"consolidate"`, `"embed"`); absent: the
    /// function's own.
    #[serde(default)]
    pub pass: Option<PassKind>,
}

impl RunRef {
    /// The run of a queued pass: no budget of its own, no secrets.
    pub fn queued(queued: &QueuedPass) -> Self {
        RunRef {
            tenant_id: queued.tenant_id.clone(),
            memory_ref: queued.memory_ref.clone(),
            pass: Some(queued.kind),
            ..RunRef::default()
        }
    }

    /// The redactor of this run (SR-1 over the run's secrets).
    pub fn redactor(&self) -> Result<memory_guard::Redactor, CoreError> {
        Ok(memory_core::writer::registry_from(&self.secrets)?.redactor())
    }
}

/// One message of a queued-pass batch. `pass` is `None` when the body is not a queued pass this
/// version reads.
#[derive(Debug)]
pub struct PassMessage {
    pub message_id: String,
    pub pass: Option<QueuedPass>,
}

#[derive(Debug)]
pub enum PassCommand {
    /// The kind to fan out; `None`: the function's own.
    FanOut(Option<PassKind>),
    Queued(Vec<PassMessage>),
    Run(RunRef),
}

/// What a pass answers: a report, or the message ids of the batch to deliver again.
#[derive(Debug)]
pub enum PassOutcome {
    Report(Value),
    FailedMessages(Vec<String>),
}

/// One ref's pass, as the function binary wires it.
#[async_trait]
pub trait RefPass: Send + Sync {
    fn kind(&self) -> PassKind;

    async fn run(&self, run: &RunRef) -> Result<Value, CoreError>;
}

/// What the [`ref_pass!`](crate::ref_pass) expansion names, so a function binary needs none of
/// these crates for it.
#[doc(hidden)]
pub mod macro_support {
    pub use async_trait::async_trait;
    pub use memory_core::ports::PassKind;
    pub use memory_core::CoreError;
    pub use serde_json::Value;
}

/// Declares a function's [`RefPass`]: a newtype over the service that runs it, the kind it
/// answers to, and one run (`$service` the service, `$run` the [`RunRef`]), so each binary
/// states only what its pass does.
#[macro_export]
macro_rules! ref_pass {
    ($(#[$meta:meta])* $name:ident($inner:ty), $kind:ident, |$service:ident, $run:ident| $body:block) => {
        $(#[$meta])*
        pub struct $name(pub $inner);

        #[$crate::background_api::macro_support::async_trait]
        impl $crate::background_api::RefPass for $name {
            fn kind(&self) -> $crate::background_api::macro_support::PassKind {
                $crate::background_api::macro_support::PassKind::$kind
            }

            async fn run(
                &self,
                $run: &$crate::background_api::RunRef,
            ) -> Result<
                $crate::background_api::macro_support::Value,
                $crate::background_api::macro_support::CoreError,
            > {
                let $service = &self.0;
                $body
            }
        }
    };
}

/// A pass's answer, metered: `counts` of its report when it ran, `failure` once when it did not
/// (the count an alarm watches). Metrics carry counts only, never content.
pub fn metered<R: Serialize>(
    outcome: Result<R, CoreError>,
    failure: &'static str,
    counts: impl FnOnce(&R) -> Vec<(&'static str, u64)>,
) -> Result<Value, CoreError> {
    match outcome {
        Ok(report) => {
            crate::metrics::emit(&counts(&report));
            Ok(json!(report))
        }
        Err(e) => {
            crate::metrics::emit(&[(failure, 1)]);
            Err(e)
        }
    }
}

/// The pass of `kind` among `passes` (`None`: the first, the function's own); a kind the
/// function does not run is the caller's error on `field`.
fn pick<'a>(
    passes: &[&'a dyn RefPass],
    kind: Option<PassKind>,
    field: &'static str,
) -> Result<&'a dyn RefPass, CoreError> {
    let found = match kind {
        None => passes.first(),
        Some(kind) => passes.iter().find(|p| p.kind() == kind),
    };
    found.copied().ok_or_else(|| {
        let served: Vec<&str> = passes.iter().map(|p| p.kind().as_str()).collect();
        CoreError::invalid(
            field,
            format!("this function runs {} passes", served.join(" and ")),
        )
    })
}

pub async fn handle(
    passes: &[&dyn RefPass],
    store: &dyn EntryStore,
    queue: Option<&dyn PassQueue>,
    command: PassCommand,
) -> Result<PassOutcome, WireError> {
    match command {
        PassCommand::FanOut(kind) => {
            let pass = pick(passes, kind, "pass")?;
            let queue = queue.ok_or_else(|| {
                CoreError::invalid("action", "no pass queue configured (PASS_QUEUE_URL)")
            })?;
            let report = fan_out(store, queue, pass.kind()).await?;
            Ok(PassOutcome::Report(json!(report)))
        }
        PassCommand::Queued(messages) => {
            let mut failed = Vec::new();
            for message in messages {
                let runs = |q: &QueuedPass| pick(passes, Some(q.kind), "kind").ok();
                let Some((queued, pass)) =
                    message.pass.and_then(|q| runs(&q).map(|pass| (q, pass)))
                else {
                    // A queued pass this function cannot read will never succeed: drop it loudly
                    // rather than retry it forever.
                    tracing::error!(message_id = %message.message_id, "unreadable queued pass dropped");
                    continue;
                };
                // Each queued pass acts for its own tenant (a batch can hold several tenants'
                // refs).
                let run = RunRef::queued(&queued);
                if let Err(e) = acting_for(Some(&queued.tenant_id), pass.run(&run)).await {
                    tracing::warn!(error = %e, memory_ref = %ref_hash(&queued.memory_ref), "pass failed, will retry");
                    failed.push(message.message_id);
                }
            }
            Ok(PassOutcome::FailedMessages(failed))
        }
        PassCommand::Run(run) => {
            let pass = pick(passes, run.pass, "pass")?;
            let report = acting_for(Some(&run.tenant_id), pass.run(&run)).await?;
            Ok(PassOutcome::Report(report))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_testkit::in_memory::{InMemoryEntryStore, RecordingQueue};

    /// Answers its kind, so a test sees which pass a command reached.
    struct Named(PassKind);

    #[async_trait]
    impl RefPass for Named {
        fn kind(&self) -> PassKind {
            self.0
        }

        async fn run(&self, _: &RunRef) -> Result<Value, CoreError> {
            Ok(json!(self.0.as_str()))
        }
    }

    fn run(pass: Option<PassKind>) -> PassCommand {
        PassCommand::Run(RunRef {
            tenant_id: "t1".into(),
            memory_ref: "workspaces/t1/agents/a1/memories".into(),
            pass,
            ..RunRef::default()
        })
    }

    fn report(outcome: Result<PassOutcome, WireError>) -> Option<Value> {
        match outcome {
            Ok(PassOutcome::Report(v)) => Some(v),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_command_reaches_the_pass_of_its_kind_and_the_first_by_default() {
        let (dream, embed) = (Named(PassKind::Dream), Named(PassKind::Embed));
        let passes: [&dyn RefPass; 2] = [&dream, &embed];
        let store = InMemoryEntryStore::new();
        let queue = RecordingQueue::new();
        let handle = |c| handle(&passes, &store, Some(&queue), c);
        assert_eq!(report(handle(run(None)).await), Some(json!("dream")));
        assert_eq!(
            report(handle(run(Some(PassKind::Embed))).await),
            Some(json!("embed"))
        );
        let refused = handle(run(Some(PassKind::Consolidate))).await.err();
        assert_eq!(refused.and_then(|e| e.field), Some("pass".to_owned()));
        // A queued embed pass runs the embed pass; one of a kind not served is dropped.
        let queued = |kind| PassMessage {
            message_id: "m".into(),
            pass: Some(QueuedPass {
                kind,
                tenant_id: "t1".into(),
                memory_ref: "workspaces/t1/agents/a1/memories".into(),
            }),
        };
        let batch =
            PassCommand::Queued(vec![queued(PassKind::Embed), queued(PassKind::Consolidate)]);
        assert!(matches!(
            handle(batch).await,
            Ok(PassOutcome::FailedMessages(failed)) if failed.is_empty()
        ));
        // The fan-out of a named kind reads that kind's pending refs.
        store.calls.reset();
        assert!(report(handle(PassCommand::FanOut(Some(PassKind::Embed))).await).is_some());
        assert_eq!(store.calls.get("pending_refs"), 16);
    }
}
