//! A local Bedrock Runtime stand-in (`infra/local/embedder.py` or `converse.py`) as a server on
//! a free port, for end-to-end tests that point the function binaries at it
//! (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`). Ready once it has written its port file; stopped (by
//! its pid) on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct BedrockStandIn {
    child: Child,
    url: String,
}

impl BedrockStandIn {
    /// Starts `infra/local/<name>.py serve --port 0` with the project venv's Python.
    pub fn start(name: &str) -> BedrockStandIn {
        let port_file = std::env::temp_dir().join(format!(
            "standin-{name}-{}.port",
            ulid::Ulid::new().to_string().to_lowercase()
        ));
        let mut child = Command::new(aws_test_support::venv_python())
            .arg(aws_test_support::repo_root().join(format!("infra/local/{name}.py")))
            .args(["serve", "--port", "0", "--port-file"])
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // One line per request (model, status, tokens); the test's assertions say what
            // went wrong, so the lines are not kept.
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} stand-in did not start: {e}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port.trim().to_owned();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{name} stand-in exited: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "{name} stand-in not ready in 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let _ = std::fs::remove_file(&port_file);
        BedrockStandIn {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// What the function binaries set as `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for BedrockStandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
