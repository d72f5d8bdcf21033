//! Test support for suites that run against the emulator (LocalStack or the moto server that
//! `infra/local/up` starts). Missing configuration is a loud failure, never a silent skip.

pub mod proxy;

use std::collections::HashMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
    FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use serde_json::Value;

/// Reads an env var the emulator setup exports, or fails the test with the fix.
pub fn required_env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{name} is not set: these tests need the local AWS emulator. Run `eval \"$(infra/local/up)\"` \
             first, or use `tests/run`, which does it for you."
        ),
    }
}

/// The checkout's root, where `infra/` and `tests/` live.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project venv's Python, which runs the local stand-ins and the fault proxy; panics with
/// the fix when the venv is missing.
pub fn venv_python() -> PathBuf {
    let python = repo_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run infra/local/venv (tests/run does)",
        python.display()
    );
    python
}

/// SDK configuration for the emulator; panics unless `AWS_ENDPOINT_URL` is set.
pub async fn emulator_config() -> SdkConfig {
    required_env("AWS_ENDPOINT_URL");
    // The functions' TLS stack (rustls with ring), since the SDK crates carry no default client.
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .load()
        .await
}

/// What a test or bench keeps of each SDK call. [`Observed`] makes an observer an interceptor
/// and hands it each call at the points below, with the state [`CallObserver::start`] gave that
/// call: an observer sees whole calls (an SDK retry is the same call) without the interceptor
/// contexts and config bag. One observer of a type per client (the state is kept by type).
pub trait CallObserver: Debug + Send + Sync + 'static {
    /// What the observer keeps of one call while it runs.
    type Call: Clone + Debug + Send + Sync + 'static;

    /// A call starts, before its input is serialized.
    fn start(&self) -> Self::Call;

    /// An attempt of the call is about to be signed and sent.
    fn send(&self, _call: &mut Self::Call, _request: &mut HttpRequest) -> Result<(), BoxError> {
        Ok(())
    }

    /// The call is over: its last attempt's response, when one came.
    fn end(&self, _call: Self::Call, _response: Option<&HttpResponse>) {}
}

/// The interceptor of an observer: `.interceptor(Observed(observer.clone()))`.
#[derive(Clone, Debug, Default)]
pub struct Observed<O>(pub O);

/// One call's state for an observer, kept in the call's config bag.
#[derive(Clone, Debug)]
struct CallState<C>(C);

impl<C: Debug + Send + Sync + 'static> Storable for CallState<C> {
    type Storer = StoreReplace<Self>;
}

impl<O: CallObserver> Intercept for Observed<O> {
    fn name(&self) -> &'static str {
        std::any::type_name::<O>()
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(CallState(self.0.start()));
        Ok(())
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(CallState(mut call)) = cfg.load::<CallState<O::Call>>().cloned() {
            self.0.send(&mut call, context.request_mut())?;
            cfg.interceptor_state().store_put(CallState(call));
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(CallState(call)) = cfg.load::<CallState<O::Call>>().cloned() {
            self.0.end(call, context.response());
        }
        Ok(())
    }
}

/// Counts AWS operations (calls) by name, once per call: SDK retries of a call after a
/// transient emulator error are the same call, so they do not change the count. On a client
/// as `Observed(counter.clone())`.
#[derive(Clone, Debug, Default)]
pub struct RequestCounter(Arc<Mutex<HashMap<String, u64>>>);

impl RequestCounter {
    pub fn get(&self, operation: &str) -> u64 {
        self.0
            .lock()
            .map(|m| m.get(operation).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.0.lock().map(|m| m.values().sum()).unwrap_or(0)
    }

    pub fn reset(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.clear();
        }
    }
}

/// The operation a request calls, from its `x-amz-target` header (`DynamoDB_20120810.Query`
/// is `Query`); `None` for the REST services (S3), which name the operation by method and path.
pub fn operation_name(request: &HttpRequest) -> Option<&str> {
    request
        .headers()
        .get("x-amz-target")
        .and_then(|t| t.rsplit('.').next())
}

impl CallObserver for RequestCounter {
    /// Whether the call is counted yet: at its first attempt, so retries are not counted again.
    type Call = bool;

    fn start(&self) -> bool {
        false
    }

    fn send(&self, counted: &mut bool, request: &mut HttpRequest) -> Result<(), BoxError> {
        if std::mem::replace(counted, true) {
            return Ok(());
        }
        let op = operation_name(request)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{} {}", request.method(), request.uri()));
        if let Ok(mut m) = self.0.lock() {
            *m.entry(op).or_default() += 1;
        }
        Ok(())
    }
}

/// A private SQS queue subscribed to the bus for one tenant's events only, so parallel tests
/// never consume each other's messages.
pub struct EventTap {
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
    bus: String,
    rule: String,
    queue_url: String,
}

impl EventTap {
    pub async fn for_tenant(sdk: &SdkConfig, tenant: &str) -> EventTap {
        let bus = required_env("EVENT_BUS_NAME");
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let events = aws_sdk_eventbridge::Client::new(sdk);
        let name: String = format!("tap-{tenant}").chars().take(70).collect();
        let queue_url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("create tap queue: {e:?}"))
            .queue_url
            .unwrap_or_else(|| panic!("tap queue has no url"));
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap_or_else(|e| panic!("tap queue arn: {e:?}"))
            .attributes
            .and_then(|a| {
                a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                    .cloned()
            })
            .unwrap_or_else(|| panic!("tap queue has no arn"));
        let pattern =
            serde_json::json!({"source": ["wop-memory"], "detail": {"tenantId": [tenant]}});
        events
            .put_rule()
            .name(&name)
            .event_bus_name(&bus)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("tap rule: {e:?}"));
        events
            .put_targets()
            .rule(&name)
            .event_bus_name(&bus)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("tap")
                    .arn(arn)
                    .build()
                    .unwrap_or_else(|e| panic!("tap target: {e:?}")),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("tap targets: {e:?}"));
        EventTap {
            sqs,
            events,
            bus,
            rule: name,
            queue_url,
        }
    }

    /// Receives until `count` events arrived or `timeout` passed; returns the EventBridge
    /// envelopes (`detail-type`, `detail`, ...) in arrival order.
    pub async fn collect(&self, count: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < count && Instant::now() < deadline {
            for m in receive_and_delete(&self.sqs, &self.queue_url).await {
                if let Some(body) = m.body() {
                    out.push(serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())));
                }
            }
        }
        out
    }

    /// Collects for a short while after the expected events, to catch extra (duplicate) ones.
    pub async fn collect_settled(&self, count: usize, timeout: Duration) -> Vec<Value> {
        let mut events = self.collect(count, timeout).await;
        events.extend(self.collect(usize::MAX, Duration::from_millis(1500)).await);
        events
    }

    /// [`Self::collect_settled`] within the 20 s an end-to-end run allows for delivery, then
    /// [`Self::remove`].
    pub async fn finish(self, count: usize) -> Vec<Value> {
        let events = self.collect_settled(count, Duration::from_secs(20)).await;
        self.remove().await;
        events
    }

    /// Best effort: a tap left behind only costs the emulator a rule and a queue.
    pub async fn remove(self) {
        let (events, rule, bus) = (&self.events, &self.rule, &self.bus);
        let targets = events
            .remove_targets()
            .rule(rule)
            .event_bus_name(bus)
            .ids("tap");
        let _ = targets.send().await;
        let _ = events
            .delete_rule()
            .name(rule)
            .event_bus_name(bus)
            .send()
            .await;
        let _ = self
            .sqs
            .delete_queue()
            .queue_url(&self.queue_url)
            .send()
            .await;
    }
}

/// One long poll of `queue_url` (up to 10 messages, waiting up to 1 s); the messages it returns
/// are deleted (best effort), as a consumer that handled them would.
pub async fn receive_and_delete(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Vec<aws_sdk_sqs::types::Message> {
    let messages = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap_or_else(|e| panic!("receive from {queue_url}: {e:?}"))
        .messages
        .unwrap_or_default();
    for handle in messages.iter().filter_map(|m| m.receipt_handle()) {
        let _ = sqs
            .delete_message()
            .queue_url(queue_url)
            .receipt_handle(handle)
            .send()
            .await;
    }
    messages
}

/// The events of one `detail-type`, in the order the tap received them.
pub fn of_type<'a>(events: &'a [Value], detail_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["detail-type"] == detail_type)
        .collect()
}
