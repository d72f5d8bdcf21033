//! `tests/fault/proxy.py` with no faults, in front of the emulator, as the independent side of
//! metering checks (docs/metering.md "Accuracy and overhead"): it sums the `ConsumedCapacity`
//! the emulator answered, the bytes of S3 requests and answers and the events accepted, leaving
//! out the meter's own calls (`GET /__fault/usage`). Stopped (by its pid) on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub struct CountingProxy {
    child: Child,
    addr: String,
}

impl CountingProxy {
    /// Starts the proxy in front of `upstream` (an `http://` URL).
    pub fn start(upstream: &str) -> CountingProxy {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = root.join(".venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run infra/local/venv (tests/run does)",
            python.display()
        );
        let mut child = Command::new(python)
            .arg(root.join("tests/fault/proxy.py"))
            .args(["--port", "0", "--upstream", upstream])
            .stdout(Stdio::piped())
            // One line per upstream failure or 5xx answer, never a body.
            .stderr(Stdio::inherit())
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
        CountingProxy { child, addr }
    }

    /// What the function binaries set as `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn control(&self, method: &str, path: &str) -> Value {
        let mut stream = TcpStream::connect(&self.addr).expect("proxy control connection");
        let request = format!(
            "{method} /__fault/{path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.addr
        );
        stream
            .write_all(request.as_bytes())
            .expect("control request");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("control answer");
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("control answer {body:?}: {e}"))
    }

    /// The sums since the start or the last [`reset`](Self::reset): `readUnits`, `writeUnits`,
    /// `s3Requests`, `s3BytesIn`, `s3BytesOut`, `events`, and the meter's own `meterReadUnits`,
    /// `meterWriteUnits`, `meterWrites`; with `billedWriteUnits` / `meterBilledWriteUnits`, what
    /// DynamoDB's pricing rules make of the written items' sizes.
    pub fn usage(&self) -> Value {
        self.control("GET", "usage")
    }

    pub fn reset(&self) {
        self.control("POST", "reset");
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
