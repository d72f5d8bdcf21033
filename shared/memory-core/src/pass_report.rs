//! How a background pass reports a run in its log (docs/operating.md "Logs, metrics and
//! alarms"): one INFO line with the tenant and the run's report. A report holds counts and ids
//! only, never content, so its serialised form is what the line carries, one `report` field; a
//! field added to a report reaches the log without a second list of fields to keep in step.

use memory_guard::TenantId;
use serde::Serialize;

/// Logs one run of a pass at INFO: `done` is the line's message and names the pass, `tenant`
/// the tenant it ran for (`None` for a cross-tenant run, such as the commitment tick), `report`
/// what the pass answers its caller.
pub fn log_done(done: &'static str, tenant: Option<&TenantId>, report: &impl Serialize) {
    // A struct of counts, flags and ids always serialises; an empty field would say otherwise.
    let report = serde_json::to_string(report).unwrap_or_default();
    tracing::info!(
        tenant = tenant.map(tracing::field::display),
        report = %report,
        "{done}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// One event's fields as `(name, value)` pairs.
    type Line = Vec<(String, String)>;

    /// Records every event.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<Line>>>);

    struct Fields<'a>(&'a mut Line);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push((field.name().to_owned(), format!("{value:?}")));
        }
    }

    impl Subscriber for Lines {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut fields = Vec::new();
            event.record(&mut Fields(&mut fields));
            if let Ok(mut lines) = self.0.lock() {
                lines.push(fields);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Counted {
        status: &'static str,
        entries_read: usize,
    }

    fn logged(tenant: Option<&TenantId>) -> Line {
        let lines = Lines::default();
        let report = Counted {
            status: "complete",
            entries_read: 7,
        };
        tracing::subscriber::with_default(lines.clone(), || {
            log_done("counted pass done", tenant, &report)
        });
        let mut all = lines.0.lock().expect("lines").clone();
        assert_eq!(all.len(), 1, "one line a run");
        all.remove(0)
    }

    #[test]
    fn the_line_names_the_pass_the_tenant_and_the_whole_report() {
        let tenant = TenantId::parse("t1").expect("tenant");
        let fields = logged(Some(&tenant));
        let field = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(field("message"), Some("counted pass done"));
        assert_eq!(field("tenant"), Some("t1"));
        assert_eq!(
            field("report"),
            Some(r#"{"status":"complete","entriesRead":7}"#)
        );
    }

    #[test]
    fn a_cross_tenant_run_names_no_tenant() {
        let fields = logged(None);
        assert!(fields.iter().all(|(n, _)| n != "tenant"), "{fields:?}");
        assert!(fields.iter().any(|(n, _)| n == "report"), "{fields:?}");
    }
}
