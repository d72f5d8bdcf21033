//! A minimal Lambda Runtime API (the `2018-06-01` interface the AWS runtime client polls): enough
//! for `lambda_runtime` to receive invocations and post responses and errors. Each function
//! process gets its own server on an ephemeral loopback port; stdout and stderr are captured so
//! tests can scan the logs for content and secrets.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The function returned this payload.
    Response(Value),
    /// The function reported an error (`{"errorType", "errorMessage"}`).
    Error(Value),
}

impl Outcome {
    pub fn response(self) -> Value {
        match self {
            Outcome::Response(v) => v,
            Outcome::Error(e) => panic!("function failed: {e}"),
        }
    }

    pub fn error(self) -> Value {
        match self {
            Outcome::Error(e) => e,
            Outcome::Response(v) => panic!("function succeeded, expected an error: {v}"),
        }
    }
}

struct Invocation {
    id: String,
    payload: Vec<u8>,
    reply: oneshot::Sender<Outcome>,
}

struct Shared {
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Invocation>>,
    pending: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    first_poll: OnceLock<Instant>,
}

pub struct LambdaProcess {
    name: String,
    child: Child,
    invocations: mpsc::UnboundedSender<Invocation>,
    shared: Arc<Shared>,
    logs: Arc<Mutex<Vec<u8>>>,
    spawned_at: Instant,
    counter: Mutex<u64>,
}

/// Where cargo put the workspace binaries: `FUNCTION_BIN_DIR` if set (e.g. `target/release`
/// for figures), else `debug` under `CARGO_TARGET_DIR` or `<workspace>/target`.
pub fn binary_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("FUNCTION_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
                .join("debug")
        });
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the functions first with `cargo build --bins` (tests/run does)",
        path.display()
    );
    path
}

async fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<Option<(String, String, HashMap<String, String>, Vec<u8>)>> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).await?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if let Some(len) = headers
        .get("content-length")
        .and_then(|l| l.parse::<usize>().ok())
    {
        body.resize(len, 0);
        reader.read_exact(&mut body).await?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).await?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    Ok(Some((method, path, headers, body)))
}

async fn respond(
    stream: &mut BufReader<TcpStream>,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let s = stream.get_mut();
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    s.flush().await
}

/// The deadline each invocation is given: `LOCAL_FUNCTION_TIMEOUT_SECONDS` (default 30), so a
/// test can run the functions under a short timeout (their retries stop within it, as on
/// Lambda).
fn function_timeout_ms() -> u128 {
    std::env::var("LOCAL_FUNCTION_TIMEOUT_SECONDS")
        .ok()
        .and_then(|v| v.parse::<u128>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(30)
        * 1000
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    while let Some((method, path, _headers, body)) = read_request(&mut stream).await? {
        let path = path.trim_start_matches("/2018-06-01/runtime/");
        if method == "GET" && path == "invocation/next" {
            let _ = shared.first_poll.set(Instant::now());
            let next = shared.queue.lock().await.recv().await;
            let Some(inv) = next else { return Ok(()) };
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() + function_timeout_ms())
                .unwrap_or(0);
            shared
                .pending
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .insert(inv.id.clone(), inv.reply);
            let headers = [
                ("content-type", "application/json".to_owned()),
                ("lambda-runtime-aws-request-id", inv.id.clone()),
                ("lambda-runtime-deadline-ms", deadline.to_string()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:123456789012:function:local".to_owned(),
                ),
                (
                    "lambda-runtime-trace-id",
                    format!("Root=1-local-{}", inv.id),
                ),
            ];
            respond(&mut stream, "200 OK", &headers, &inv.payload).await?;
        } else if method == "POST" && path.starts_with("invocation/") {
            let mut segs = path.split('/');
            let (_, id, kind) = (segs.next(), segs.next().unwrap_or_default(), segs.next());
            let value: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
            let outcome = if kind == Some("response") {
                Outcome::Response(value)
            } else {
                Outcome::Error(value)
            };
            let waiter = shared
                .pending
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .remove(id);
            if let Some(w) = waiter {
                let _ = w.send(outcome);
            }
            respond(&mut stream, "202 Accepted", &[], b"{}").await?;
        } else {
            // init/error and anything else: acknowledge; the test sees the failure as a missing
            // response and in the captured logs.
            respond(&mut stream, "202 Accepted", &[], b"{}").await?;
        }
    }
    Ok(())
}

fn capture(
    logs: Arc<Mutex<Vec<u8>>>,
    pipe: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>,
) {
    if let Some(mut pipe) = pipe {
        tokio::spawn(async move {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut l) = logs.lock() {
                    l.extend_from_slice(&buf[..n]);
                }
            }
        });
    }
}

impl LambdaProcess {
    /// Starts the named workspace binary against a fresh Runtime API. The process inherits the
    /// test's environment (emulator endpoint, credentials, resource names) plus `extra_env`.
    pub async fn start(name: &str, extra_env: &[(&str, &str)]) -> LambdaProcess {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind runtime api: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("runtime api addr: {e}"));
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            queue: tokio::sync::Mutex::new(rx),
            pending: Mutex::new(HashMap::new()),
            first_poll: OnceLock::new(),
        });
        let server_shared = shared.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = server_shared.clone();
                tokio::spawn(async move {
                    let _ = serve_connection(stream, shared).await;
                });
            }
        });
        let mut command = Command::new(binary_path(name));
        command
            .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            // The deployed level, whatever the developer's shell has: the leak scans read these logs.
            .env_remove("RUST_LOG")
            .env("AWS_LAMBDA_LOG_LEVEL", "INFO")
            // Tests distil what they just wrote; production waits out in-flight writes.
            .env("DREAM_SETTLE_SECONDS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in extra_env {
            command.env(k, v);
        }
        let spawned_at = Instant::now();
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let logs = Arc::new(Mutex::new(Vec::new()));
        capture(logs.clone(), child.stdout.take());
        capture(logs.clone(), child.stderr.take());
        LambdaProcess {
            name: name.to_owned(),
            child,
            invocations: tx,
            shared,
            logs,
            spawned_at,
            counter: Mutex::new(0),
        }
    }

    /// One synchronous invoke that must succeed: its response.
    pub async fn respond(&self, payload: &Value) -> Value {
        self.invoke(payload).await.response()
    }

    /// One synchronous invoke, as `aws lambda invoke` would do.
    pub async fn invoke(&self, payload: &Value) -> Outcome {
        let bytes = serde_json::to_vec(payload).unwrap_or_else(|e| panic!("encode payload: {e}"));
        match self.invoke_bytes(bytes, Duration::from_secs(120)).await {
            Some(outcome) => outcome,
            None => panic!(
                "{} did not answer within 120 s; logs:\n{}",
                self.name,
                self.logs()
            ),
        }
    }

    /// One synchronous invoke with the payload bytes exactly as given (they need not be JSON:
    /// the Lambda service passes the caller's bytes through). `None` when the function did not
    /// answer within `timeout` (or its Runtime API is gone).
    pub async fn invoke_bytes(&self, payload: Vec<u8>, timeout: Duration) -> Option<Outcome> {
        let id = {
            let mut c = self.counter.lock().unwrap_or_else(|e| e.into_inner());
            *c += 1;
            format!("{}-{:04}", self.name, *c)
        };
        let (reply, answer) = oneshot::channel();
        self.invocations
            .send(Invocation { id, payload, reply })
            .ok()?;
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(outcome)) => Some(outcome),
            _ => None,
        }
    }

    /// The binary's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Like [`LambdaProcess::ready`], without panicking: `None` if the process has not polled
    /// for work within `timeout`.
    pub async fn ready_within(&self, timeout: Duration) -> Option<Duration> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.shared.first_poll.get() {
                return Some(at.duration_since(self.spawned_at));
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Waits until the process first polls for work: the cold-start cost Lambda would bill.
    pub async fn ready(&self) -> Duration {
        for _ in 0..3000 {
            if let Some(at) = self.shared.first_poll.get() {
                return at.duration_since(self.spawned_at);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!(
            "{} never polled the runtime api; logs:\n{}",
            self.name,
            self.logs()
        )
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything the process wrote to stdout and stderr so far.
    pub fn logs(&self) -> String {
        self.logs
            .lock()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .unwrap_or_default()
    }
}
