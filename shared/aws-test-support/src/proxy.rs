//! `tests/fault/proxy.py` in front of the emulator, for suites that count or refuse what the
//! adapters send through it (its README says what each flag does). Stopped (by its pid) on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub struct FaultProxy {
    child: Child,
    addr: String,
}

impl FaultProxy {
    /// Starts the proxy on a free port with `args` (at least `--upstream URL`); `stderr` is where
    /// its own log lines go. Panics when the project venv or the proxy is missing.
    pub fn start(args: &[&str], stderr: Stdio) -> FaultProxy {
        let mut child = Command::new(crate::venv_python())
            .arg(crate::repo_root().join("tests/fault/proxy.py"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("proxy.py did not start: {e}"));
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let addr = line
            .trim()
            .strip_prefix("listening http://")
            .unwrap_or_else(|| panic!("proxy.py said {line:?}"))
            .to_owned();
        FaultProxy { child, addr }
    }

    /// What an SDK client or a function binary takes as its endpoint.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// One request to the proxy's own control API (`/__fault/<path>`) and its JSON answer.
    pub fn control(&self, method: &str, path: &str, body: &str) -> Value {
        let mut stream = TcpStream::connect(&self.addr).expect("proxy control connection");
        let request = format!(
            "{method} /__fault/{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .expect("control request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("control answer");
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("control answer {body:?}: {e}"))
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
