//! Process start-up of every function binary, up to the first poll of the Runtime API
//! (docs/figures.md "Overview": start-up is measured from process start to that poll).
//!
//! Two choices keep it short, both made before any thread exists:
//! - **Trust roots read once.** The SDK's HTTPS client loads the platform's trust roots when the
//!   clients are built (`rustls-native-certs`). With neither `SSL_CERT_FILE` nor `SSL_CERT_DIR`
//!   set, that crate reads the system bundle file *and* every file of the hashed certificate
//!   directory beside it, which hold the same certificates (Debian and Amazon Linux both build
//!   the bundle from them): about 3 of the 4.8 ms start-up measured here. So when the operator
//!   set neither variable, `SSL_CERT_FILE` is pointed at the bundle the platform probe finds, and
//!   the same roots are read once. An operator's own setting is left exactly as it is.
//! - **One runtime thread.** A function serves one invocation at a time; a current-thread tokio
//!   runtime spawns no worker pool at start-up (blocking calls still get their own threads).

use std::future::Future;

use lambda_runtime::Error;

/// Runs `serve` (the function's wiring and the runtime loop) after logging and the start-up
/// choices above.
pub fn start(serve: impl Future<Output = Result<(), Error>>) -> Result<(), Error> {
    read_trust_roots_once();
    crate::init_logging();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve)
}

/// Points `SSL_CERT_FILE` at the platform bundle when the operator set no trust-root variable.
/// Called before the runtime starts, while the process has one thread, so setting the
/// environment races with nothing.
fn read_trust_roots_once() {
    if let Some(bundle) = bundle_to_pin(
        std::env::var_os("SSL_CERT_FILE").is_some() || std::env::var_os("SSL_CERT_DIR").is_some(),
        openssl_probe::probe().cert_file,
    ) {
        std::env::set_var("SSL_CERT_FILE", bundle);
    }
}

/// The bundle to pin: only when the operator chose nothing and the probe found a file.
fn bundle_to_pin(
    operator_chose: bool,
    probed: Option<std::path::PathBuf>,
) -> Option<std::path::PathBuf> {
    if operator_chose {
        None
    } else {
        probed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn pins_the_probed_bundle_only_when_the_operator_chose_nothing() {
        let bundle = PathBuf::from("/etc/pki/tls/certs/ca-bundle.crt");
        assert_eq!(
            bundle_to_pin(false, Some(bundle.clone())),
            Some(bundle.clone())
        );
        assert_eq!(bundle_to_pin(true, Some(bundle)), None);
        assert_eq!(bundle_to_pin(false, None), None);
    }
}
