//! `[server]`: where the control plane listens and who may talk to it.
use super::key::section;
use super::ConfigError;

section! {
    /// The HTTP gateway and the tokens that open it.
    pub struct ServerSection = "server" {
        /// Address of the HTTP gateway (the REST API, the node WebSocket,
        /// /metrics and the portal).
        listen: String = "127.0.0.1:7070".into(), was "listen";
        /// Operator bearer token, at least 16 characters. Unset: one is
        /// generated on first start, printed once, and only its hash is kept.
        operator_token: Option<String> = None, was "operator-token";
        /// Token node agents join with, at least 16 characters. Unset:
        /// generated on first start like the operator token.
        join_token: Option<String> = None, was "join-token";
        /// HTTP worker threads.
        http_workers: usize = 2, was "http-workers";
    }
}

impl ServerSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.http_workers == 0 {
            return Err(ConfigError::new(
                "server.http-workers",
                "must be greater than 0",
            ));
        }
        for (key, token) in [
            ("server.operator-token", &self.operator_token),
            ("server.join-token", &self.join_token),
        ] {
            if token.as_ref().is_some_and(|t| t.len() < 16) {
                return Err(ConfigError::new(key, "must be at least 16 characters"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_token_is_refused_naming_which() {
        let c = ServerSection {
            join_token: Some("short".into()),
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "server.join-token");
        let c = ServerSection {
            operator_token: Some("x".repeat(16)),
            join_token: Some("y".repeat(16)),
            ..Default::default()
        };
        assert_eq!(c.validate(), Ok(()));
    }
}
