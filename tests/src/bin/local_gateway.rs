//! `local_gateway`: the local front door (API Gateway HTTP API + Lambda Invoke API) in front of
//! the six real function binaries, for clients that speak HTTP, such as the official OpenWOP
//! client in `tests/python`. See `e2e::gateway` for what it emulates and where it deviates.
//!
//! ```text
//! local_gateway [--port N] [--exchanges DIR] [--logs FILE]
//! ```
//!
//! Starts the functions with the inherited environment (load the emulator settings first:
//! `eval "$(infra/local/up)"`), prints exactly one line `listening http://127.0.0.1:PORT` on
//! stdout, and serves until SIGTERM, SIGINT or the end of stdin. On exit it writes every
//! function's captured logs to `--logs FILE`. `--exchanges DIR` records each HTTP API exchange
//! with a JSON body for `tests/openapi_check.py`. One access line per request goes to stderr.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use e2e::gateway::Gateway;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str =
    "usage: local_gateway [--port N (default 0: ephemeral)] [--exchanges DIR] [--logs FILE]";

struct Args {
    port: u16,
    exchanges: Option<PathBuf>,
    logs: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        port: 0,
        exchanges: None,
        logs: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--port" => {
                args.port = value("--port")?
                    .parse()
                    .map_err(|_| "--port must be a number from 0 to 65535".to_owned())?;
            }
            "--exchanges" => args.exchanges = Some(PathBuf::from(value("--exchanges")?)),
            "--logs" => args.logs = Some(PathBuf::from(value("--logs")?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// Resolves when stdin reaches its end. A plain thread, not tokio's stdin: a blocking read there
/// would hold up the runtime's shutdown.
fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    rx
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("local_gateway: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    // Tests may set DREAM_SETTLE_SECONDS; LambdaProcess defaults it to 0 otherwise.
    let settle = std::env::var("DREAM_SETTLE_SECONDS").ok();
    let extra: Vec<(&str, &str)> = settle
        .as_deref()
        .map(|s| vec![("DREAM_SETTLE_SECONDS", s)])
        .unwrap_or_default();
    let listener = match TcpListener::bind(("127.0.0.1", args.port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "local_gateway: cannot listen on 127.0.0.1:{}: {e}",
                args.port
            );
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(args.port);
    // The exchange door's public base URL (its DID and manifest endpoints derive from it):
    // this gateway, unless the environment names one.
    let public_url = format!("http://127.0.0.1:{port}");
    let mut extra = extra;
    if std::env::var_os("OAP_PUBLIC_URL").is_none() {
        extra.push(("OAP_PUBLIC_URL", public_url.as_str()));
    }
    // The functions log at the deployed level (INFO) unless a suite asks for another, e.g. DEBUG
    // to scan what the most verbose logs hold.
    let level = std::env::var("LOCAL_GATEWAY_LOG_LEVEL").ok();
    if let Some(level) = level.as_deref() {
        extra.push(("AWS_LAMBDA_LOG_LEVEL", level));
    }
    let gateway = match Gateway::start(args.exchanges, &extra).await {
        Ok(g) => Arc::new(g),
        Err(e) => {
            eprintln!("local_gateway: {e}");
            std::process::exit(1);
        }
    };
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            eprintln!("local_gateway: cannot install signal handlers");
            std::process::exit(1);
        }
    };
    let server = tokio::spawn(gateway.clone().serve(listener));
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening http://127.0.0.1:{port}");
        let _ = out.flush();
    }
    let why = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = stdin_closed() => "end of stdin",
    };
    eprintln!("local_gateway: {why}, stopping");
    server.abort();
    if let Some(file) = &args.logs {
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(file, gateway.logs()) {
            eprintln!("local_gateway: cannot write {}: {e}", file.display());
        }
    }
    // Dropping the gateway kills the function processes (kill_on_drop).
    drop(gateway);
}
