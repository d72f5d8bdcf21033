//! The OpenIntent door's wire contract (RFC-0015 "API Endpoints", as the official `openintent`
//! client calls them), and the one place its errors become HTTP statuses. Bodies are the
//! client's own shapes: `MemoryEntry.from_dict` reads every entry, `_handle_response` turns
//! 404 / 409 / 400 / other statuses into its typed exceptions, reading `message`,
//! `current_version` and `errors` (docs/openintent.md "Errors").

use intent_memory::request::{if_match, CreateRequest, ListQuery, PatchRequest};
use intent_memory::{Caller, IntentError, IntentMemory};
use memory_api::{HttpResponse, WireError};
use memory_core::CoreError;
use serde_json::{json, Value};

/// Every route of the door lives under this prefix.
pub const PREFIX: &str = "/api/v1/";

fn reply(status: u16, body: Value) -> HttpResponse {
    HttpResponse {
        status,
        body,
        headers: Vec::new(),
    }
}

fn envelope(status: u16, code: &str, message: String, extra: Value) -> HttpResponse {
    let mut body = json!({"error": code, "message": message});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    reply(status, body)
}

/// The status and body of each failure. Messages name fields and counts only; a 409 carries
/// the entry as it now stands (§3.2), which is the caller's own or its tenant's semantic entry.
pub fn error_response(e: &IntentError) -> HttpResponse {
    let message = e.to_string();
    match e {
        IntentError::Invalid { field, reason } => envelope(
            400,
            "VALIDATION_ERROR",
            message,
            json!({"errors": [{"field": field, "message": reason}]}),
        ),
        IntentError::NotFound => envelope(404, "ENTRY_NOT_FOUND", message, json!({})),
        IntentError::NotCaller => envelope(403, "ACCESS_DENIED", message, json!({})),
        IntentError::KeyTaken {
            existing_id,
            version,
        } => envelope(
            409,
            "DUPLICATE_KEY",
            message,
            json!({"existing_id": existing_id, "current_version": version}),
        ),
        IntentError::VersionMismatch {
            current,
            current_version,
        } => envelope(
            409,
            "VERSION_MISMATCH",
            message,
            json!({"current_version": current_version, "current_entry": current}),
        ),
        IntentError::PreconditionRequired => {
            envelope(428, "PRECONDITION_REQUIRED", message, json!({}))
        }
        IntentError::CapacityExceeded {
            memory_type,
            current,
            max,
        } => envelope(
            429,
            "CAPACITY_EXCEEDED",
            message,
            json!({"memory_type": memory_type.as_str(), "current_count": current, "max_capacity": max}),
        ),
        IntentError::ValueTooLarge { size, max } => envelope(
            413,
            "VALUE_TOO_LARGE",
            message,
            json!({"size_bytes": size, "max_bytes": max}),
        ),
        // Store failures answer as every other door does (429 with Retry-After after a lost
        // race or throttling, 503 / 500 otherwise), logged once in `WireError::from`.
        IntentError::Store(s) => {
            HttpResponse::wire_error(&WireError::from(&CoreError::Store(s.clone())))
        }
    }
}

/// One request as the handler sees it.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(String, String)],
    pub if_match: Option<&'a str>,
    pub body: &'a str,
}

fn segments(path: &str) -> Option<Vec<String>> {
    let rest = path.split(PREFIX).nth(1)?;
    Some(
        rest.split('/')
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect(),
    )
}

fn method_not_allowed(allow: &'static str) -> HttpResponse {
    HttpResponse::wire_error(&WireError::method_not_allowed(allow))
}

/// Routes one request of a verified caller.
pub async fn handle(memory: &IntentMemory, caller: &Caller, r: &Request<'_>) -> HttpResponse {
    let Some(segs) = segments(r.path) else {
        return HttpResponse::wire_error(&WireError::no_route());
    };
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let result = match (r.method, segs.as_slice()) {
        ("POST", ["memory"]) => match CreateRequest::decode(r.body) {
            Ok(req) => memory.create(caller, req).await.map(|e| e.to_json()),
            Err(e) => Err(e),
        },
        (_, ["memory"]) => return method_not_allowed("POST"),
        ("GET", ["memory", id]) => memory.get(caller, id).await.map(|e| e.to_json()),
        ("PATCH", ["memory", id]) => match (if_match(r.if_match), PatchRequest::decode(r.body)) {
            (Ok(None), _) => Err(IntentError::PreconditionRequired),
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(version), Ok(patch)) => memory
                .update(caller, id, version, patch)
                .await
                .map(|e| e.to_json()),
        },
        ("DELETE", ["memory", id]) => memory
            .delete(caller, id)
            .await
            .map(|()| json!({"status": "deleted", "entry_id": id})),
        (_, ["memory", _]) => return method_not_allowed("GET, PATCH, DELETE"),
        ("GET", ["memory", id, "versions"]) => memory.versions(caller, id).await.map(|vs| {
            json!({
                "entry_id": id,
                "versions": vs.iter().map(|v| v.to_json()).collect::<Vec<_>>(),
            })
        }),
        ("GET", ["agents", agent, "memory"]) => match ListQuery::decode(r.query) {
            Ok(q) => memory
                .list(caller, agent, &q)
                .await
                .map(|es| Value::Array(es.iter().map(|e| e.to_json()).collect())),
            Err(e) => Err(e),
        },
        ("POST", ["tasks", task, "memory:archive"]) => {
            match intent_memory::request::name("task_id", &json!(task), 255) {
                Err(e) => Err(e),
                Ok(task) => memory
                    .archive_task(&caller.tenant, &caller.agent, &task)
                    .await
                    .map(|out| {
                        json!({
                            "task_id": task,
                            "agent_id": caller.agent.as_str(),
                            "entries_archived": out.entries_archived,
                            "archive": out.archive,
                        })
                    }),
            }
        }
        _ => return HttpResponse::wire_error(&WireError::no_route()),
    };
    match result {
        Ok(body) => reply(200, body),
        Err(e) => error_response(&e),
    }
}
