//! What a failed `podman pull` means. Podman says why in one `Error: ...`
//! line; the words in it come from the registry client (containers/image)
//! and Go's network stack, which are stable across podman versions. A
//! transient failure (the registry could not be reached or answered with a
//! server error) is worth another try; every other one is definite and
//! retrying it would only hammer the registry.
use caldera_spec::codes::{self, ErrorCode};
use caldera_spec::container::PullProgress;
use std::time::Duration;

/// Why an image could not be made ready on the node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// The registry answered that the image (or its tag) does not exist.
    #[error("image {image} not found in its registry ({detail})")]
    NotFound { image: String, detail: String },
    /// The registry refused the credentials, or asked for some and had none.
    #[error("the registry refused to serve {image} without valid credentials ({detail}); set the tenant's registry credentials for it")]
    Unauthorized { image: String, detail: String },
    /// The registry could not be reached (refused, unknown host, timeouts)
    /// or answered with server errors, on every try until the deadline.
    #[error("registry of {image} unreachable after {attempts} tries in {:.0} s ({detail})", .spent.as_secs_f64())]
    Unreachable {
        image: String,
        attempts: u32,
        spent: Duration,
        detail: String,
    },
    /// The node's disk is full.
    #[error("no disk space left on the node to pull {image} ({detail})")]
    DiskFull { image: String, detail: String },
    /// The prepare timeout passed while the pull was still running.
    #[error("pulling {image} did not finish within the prepare timeout of {} s: {}", .timeout.as_secs(), where_stuck(.progress))]
    TimedOut {
        image: String,
        timeout: Duration,
        progress: PullProgress,
    },
    /// Any other failure podman reported (a malformed name, a broken
    /// manifest, podman itself missing), or the pull's own files.
    #[error("pulling {image} failed: {detail}")]
    Failed { image: String, detail: String },
}

impl PullError {
    /// This failure's entry in the registry; `StartFailed.code` carries its number.
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            PullError::NotFound { .. } => &codes::IMAGE_NOT_FOUND,
            PullError::Unauthorized { .. } => &codes::IMAGE_UNAUTHORIZED,
            PullError::Unreachable { .. } => &codes::REGISTRY_UNREACHABLE,
            PullError::DiskFull { .. } => &codes::IMAGE_DISK_FULL,
            PullError::TimedOut { .. } => &codes::PULL_TIMED_OUT,
            PullError::Failed { .. } => &codes::PULL_FAILED,
        }
    }
}

/// How far a pull got, as a person reads it: "2 of 5 layers, 40 MB done".
pub fn where_stuck(p: &PullProgress) -> String {
    p.summary()
}

/// What one failed pull attempt means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Worth another try (after a backoff, within the deadline).
    Transient(String),
    /// Fails the start at once.
    Definite(PullError),
}

/// Classifies podman's error text (its `Error: ...` line, or all of its
/// stderr when it printed none) for `image`.
pub fn classify(image: &str, text: &str) -> Verdict {
    let detail = error_line(text);
    let lower = detail.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let image = image.to_string();
    if has(&["no space left on device", "disk quota exceeded"]) {
        return Verdict::Definite(PullError::DiskFull { image, detail });
    }
    if has(&[
        "manifest unknown",
        "name unknown",
        "not found",
        "no such image",
    ]) {
        return Verdict::Definite(PullError::NotFound { image, detail });
    }
    if has(&[
        "unauthorized",
        "authentication required",
        "denied",
        "invalid username/password",
        "status code from registry 401",
        "status code from registry 403",
    ]) {
        return Verdict::Definite(PullError::Unauthorized { image, detail });
    }
    if has(&[
        "connection refused",
        "no such host",
        "i/o timeout",
        "timeout awaiting",
        "tls handshake timeout",
        "connection reset",
        "network is unreachable",
        "no route to host",
        "server misbehaving",
        "temporary failure in name resolution",
        "unexpected eof",
        ": eof",
        "status code from registry 5",
        "status code from registry 429",
        "500 internal server error",
        "502 bad gateway",
        "503 service unavailable",
        "504 gateway timeout",
        "toomanyrequests",
        "too many requests",
    ]) {
        return Verdict::Transient(detail);
    }
    Verdict::Definite(PullError::Failed { image, detail })
}

/// Podman's last `Error: ...` line without the prefix; else the last line
/// that is not one of its debug log lines; else the whole text, trimmed.
fn error_line(text: &str) -> String {
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if let Some(line) = lines.clone().rev().find_map(|l| l.strip_prefix("Error: ")) {
        return line.trim().to_string();
    }
    lines
        .rev()
        .find(|l| !l.starts_with("time=\""))
        .unwrap_or_else(|| text.trim())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "registry.internal/nope:1";

    /// Podman 4.3.1's own words, captured on this project's container host
    /// (a stand-in registry on loopback for the 401 and 500 answers, a port
    /// with no listener for the refused connection, a 2 MiB tmpfs as
    /// podman's TMPDIR for the full disk).
    const NOT_FOUND: &str = "Trying to pull registry.internal/nope:1...\nError: initializing source docker://registry.internal/nope:1: reading manifest 1 in 127.0.0.1:5555/nope: manifest unknown: manifest unknown\n";
    const UNAUTHORIZED: &str = "Trying to pull 127.0.0.1:5601/x:1...\nError: initializing source docker://127.0.0.1:5601/x:1: reading manifest 1 in 127.0.0.1:5601/x: unauthorized\n";
    const REFUSED: &str = "Error: initializing source docker://127.0.0.1:5599/x:1: pinging container registry 127.0.0.1:5599: Get \"http://127.0.0.1:5599/v2/\": dial tcp 127.0.0.1:5599: connect: connection refused\n";
    const SERVER_ERROR: &str = "Trying to pull 127.0.0.1:5601/x:1...\nError: initializing source docker://127.0.0.1:5601/x:1: pinging container registry 127.0.0.1:5601: invalid status code from registry 500 (Internal Server Error)\n";
    /// The words Go's resolver uses, in podman's wrapping (a lookup or a
    /// connection to an address outside loopback is never made from here).
    const NO_SUCH_HOST: &str = "Error: initializing source docker://nosuch.invalid/x:1: pinging container registry nosuch.invalid: Get \"https://nosuch.invalid/v2/\": dial tcp: lookup nosuch.invalid: no such host\n";
    const IO_TIMEOUT: &str = "Error: initializing source docker://10.0.0.1:5000/x:1: pinging container registry 10.0.0.1:5000: Get \"https://10.0.0.1:5000/v2/\": dial tcp 10.0.0.1:5000: i/o timeout\n";
    const DISK_FULL: &str = "Copying blob sha256:c967ba3692dae6b975e9efbe065bd23bb317f8d64a421958875b243a9b7b4bef\nError: writing blob: storing blob to file \"/tmp/h2cap/small/tmp/storage1348622739/1\": write /tmp/h2cap/small/tmp/storage1348622739/1: no space left on device\n";

    fn definite_code(text: &str) -> u32 {
        match classify(IMAGE, text) {
            Verdict::Definite(e) => e.error_code().code,
            Verdict::Transient(d) => panic!("transient, expected definite: {d}"),
        }
    }

    #[test]
    fn definite_failures_get_their_own_code() {
        assert_eq!(definite_code(NOT_FOUND), codes::IMAGE_NOT_FOUND.code);
        assert_eq!(definite_code(UNAUTHORIZED), codes::IMAGE_UNAUTHORIZED.code);
        assert_eq!(definite_code(DISK_FULL), codes::IMAGE_DISK_FULL.code);
        assert_eq!(
            definite_code("Error: invalid reference format"),
            codes::PULL_FAILED.code
        );
    }

    #[test]
    fn network_and_server_errors_are_transient() {
        for text in [REFUSED, SERVER_ERROR, NO_SUCH_HOST, IO_TIMEOUT] {
            assert!(
                matches!(classify(IMAGE, text), Verdict::Transient(_)),
                "{text}"
            );
        }
    }

    #[test]
    fn the_sentence_is_podmans_reason_without_its_debug_lines() {
        let text = format!("time=\"2026-12-03T14:55:55Z\" level=debug msg=\"GET http://127.0.0.1:5555/v2/\"\n{NOT_FOUND}");
        let Verdict::Definite(e) = classify(IMAGE, &text) else {
            panic!("not definite")
        };
        assert_eq!(
            e.to_string(),
            "image registry.internal/nope:1 not found in its registry (initializing source docker://registry.internal/nope:1: reading manifest 1 in 127.0.0.1:5555/nope: manifest unknown: manifest unknown)"
        );
        assert!(!e.to_string().contains("level=debug"));
    }

    #[test]
    fn a_timeout_says_how_far_the_pull_got() {
        let e = PullError::TimedOut {
            image: "registry.internal/x:1".into(),
            timeout: Duration::from_secs(30),
            progress: PullProgress {
                image: "registry.internal/x:1".into(),
                layers_done: 2,
                layers_total: 5,
                bytes_done: 40_500_000,
            },
        };
        assert_eq!(
            e.to_string(),
            "pulling registry.internal/x:1 did not finish within the prepare timeout of 30 s: 2 of 5 layers, 40 MB done"
        );
        let stuck = PullProgress::default();
        assert_eq!(
            where_stuck(&stuck),
            "no layer started yet (still reaching the registry), 0 B done"
        );
    }
}
