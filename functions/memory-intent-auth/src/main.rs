//! `memory-intent-auth`: the OpenIntent door's API Gateway Lambda authorizer (HTTP API,
//! payload 2.0, simple responses). The official client sends `X-API-Key` and `X-Agent-ID`; a key
//! maps to exactly one tenant and the agents it may act as (`intent_memory::api_key`). The
//! answer is cached by API Gateway per key and agent for the route's TTL, which bounds how long
//! a revoked key keeps working (docs/openintent.md "Who is calling"). Logs carry the key id and
//! the reason of a refusal, never the key.

use intent_memory::api_key::{self, KeyRegistry};
use lambda_adapter::Answer;
use lambda_runtime::Error;
use memory_aws::keyed::DynamoKeyRegistry;
use memory_aws::AwsPorts;
use memory_core::ports::{Clock, SystemClock};
use serde_json::{json, Value};

fn main() -> Result<(), Error> {
    lambda_adapter::start(serve())
}

async fn serve() -> Result<(), Error> {
    let ports = AwsPorts::from_env().await?;
    let keys = DynamoKeyRegistry::new(ports.dynamo.clone(), ports.table.clone());
    let keys = &keys;
    lambda_adapter::run(Ok, |event: Value| async move {
        Ok(Answer::Json(decide(keys, &SystemClock, &event).await))
    })
    .await
}

/// The header's value as API Gateway hands it over (names lower-cased in payload 2.0).
fn header<'a>(event: &'a Value, name: &str) -> Option<&'a str> {
    event
        .get("headers")?
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

async fn decide(keys: &dyn KeyRegistry, clock: &dyn Clock, event: &Value) -> Value {
    let deny = |reason: api_key::Denied, key_id: Option<&str>| {
        tracing::info!(
            reason = reason.as_str(),
            key_id = key_id.unwrap_or("-"),
            "api key refused"
        );
        json!({"isAuthorized": false})
    };
    let (Some(presented), Some(agent)) = (header(event, "x-api-key"), header(event, "x-agent-id"))
    else {
        return deny(api_key::Denied::Malformed, None);
    };
    let Some(key_id) = api_key::key_id_of(presented) else {
        return deny(api_key::Denied::Malformed, None);
    };
    let record = match keys.get(key_id).await {
        Ok(Some(record)) => record,
        Ok(None) => return deny(api_key::Denied::Unknown, Some(key_id)),
        Err(e) => {
            // Fail closed: a store failure is a refusal, never a pass.
            tracing::error!(error = %e, key_id, "api key lookup failed");
            return json!({"isAuthorized": false});
        }
    };
    match api_key::verify(&record, presented, agent, clock.now()) {
        Ok(caller) => json!({
            "isAuthorized": true,
            "context": {
                "tenantId": caller.tenant.as_str(),
                "agentId": caller.agent.as_str(),
                "keyId": key_id,
            },
        }),
        Err(reason) => deny(reason, Some(key_id)),
    }
}
