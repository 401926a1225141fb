//! HTTP client of the Caldera API and the response envelope.
//!
//! Every API command goes through [`ApiClient::call`], which sends one request,
//! reads the envelope `{"code":0,"msg":"ok","data":...,"request_id":"..."}`
//! and hands back `data`, or turns an error envelope into the one-line message
//! `<msg> (<error> <code>, field <field>)` that the user sees.
use super::CliError;
use serde_json::Value;
use std::time::Duration;

/// Largest response body the CLI reads (logs can be big; the server caps them too).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// How long one request may take before the CLI gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Flags every API command shares. `global` so that they may be written after
/// a nested subcommand too (`caldera tenant create demo --json`).
#[derive(clap::Args, Debug, Clone)]
pub struct ClientOpts {
    /// Address of the Caldera server [default: the context's, else http://127.0.0.1:7070].
    #[arg(long, global = true, env = "CALDERA_SERVER")]
    pub server: Option<String>,
    /// Bearer token: a tenant token, or the operator token for tenant and quota
    /// commands [default: the context's].
    #[arg(long, global = true, env = "CALDERA_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A context saved by `caldera login` (or `caldera up`) [default: the current one].
    #[arg(long, global = true, env = "CALDERA_CONTEXT")]
    pub context: Option<String>,
    /// Print the response's `data` as pretty JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    pub json: bool,
}

/// HTTP verbs the API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Delete,
}

/// A successful answer: the HTTP status (201 vs 200 tells a new task from an
/// existing one) and the envelope's `data`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub data: Value,
}

/// A client of one Caldera server with one token.
pub struct ApiClient {
    base: String,
    token: Option<String>,
    http: awc::Client,
}

impl ApiClient {
    /// A client for `base` (e.g. `http://127.0.0.1:7070`). Needs a running
    /// actix System (see [`block_on`]).
    pub fn new(base: &str, token: Option<String>) -> Self {
        ApiClient {
            base: base.trim_end_matches('/').to_string(),
            token,
            http: awc::Client::builder().timeout(REQUEST_TIMEOUT).finish(),
        }
    }

    /// A client built from the shared command-line flags and the saved
    /// contexts (see [`super::context`]).
    pub fn from_opts(opts: &ClientOpts) -> Result<Self, CliError> {
        let (server, token) = super::context::resolve(
            opts.server.as_deref(),
            opts.token.as_deref(),
            opts.context.as_deref(),
        )?;
        Ok(ApiClient::new(&server, token))
    }

    /// Sends one request and returns the envelope's `data`. `path` is already
    /// encoded (see [`encode`]); `query` pairs are encoded here, and empty
    /// values are left out so optional filters can be passed as they are.
    pub async fn call(
        &self,
        verb: Verb,
        path: &str,
        query: &[(&str, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Answer, CliError> {
        let (status, bytes) = self.exchange(verb, path, query, body, None).await?;
        read_envelope(status, &bytes).map(|data| Answer { status, data })
    }

    /// One request: its status and body, whatever the body is.
    async fn exchange(
        &self,
        verb: Verb,
        path: &str,
        query: &[(&str, String)],
        body: Option<Vec<u8>>,
        accept: Option<&str>,
    ) -> Result<(u16, actix_web::web::Bytes), CliError> {
        let url = format!("{}{}{}", self.base, path, query_string(query));
        let method = match verb {
            Verb::Get => awc::http::Method::GET,
            Verb::Post => awc::http::Method::POST,
            Verb::Put => awc::http::Method::PUT,
            Verb::Delete => awc::http::Method::DELETE,
        };
        let mut request = self.http.request(method, url.as_str());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(accept) = accept {
            request = request.insert_header(("accept", accept));
        }
        let sent = match body {
            Some(bytes) => {
                request
                    .insert_header(("content-type", "application/json"))
                    .send_body(bytes)
                    .await
            }
            None => request.send().await,
        };
        let mut response =
            sent.map_err(|e| CliError::Failed(format!("cannot reach {}: {e}", self.base)))?;
        let status = response.status().as_u16();
        let bytes = response
            .body()
            .limit(MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| CliError::Failed(format!("reading the answer of {url}: {e}")))?;
        Ok((status, bytes))
    }

    /// GET `path` and return `data`.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, CliError> {
        Ok(self.call(Verb::Get, path, query, None).await?.data)
    }

    /// GET `path` asking for CSV (`Accept: text/csv`) and return the text;
    /// an error answer is still the JSON envelope, read as usual.
    pub async fn get_csv(&self, path: &str, query: &[(&str, String)]) -> Result<String, CliError> {
        let accept = Some("text/csv");
        let (status, bytes) = self.exchange(Verb::Get, path, query, None, accept).await?;
        if !(200..300).contains(&status) {
            read_envelope(status, &bytes)?;
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Sends `body` as JSON with `verb` and returns the answer.
    pub async fn send_json(
        &self,
        verb: Verb,
        path: &str,
        body: &Value,
    ) -> Result<Answer, CliError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| CliError::Failed(format!("encoding the request: {e}")))?;
        self.call(verb, path, &[], Some(bytes)).await
    }
}

/// Runs `future` on a fresh actix System: awc needs one, and the CLI commands
/// are otherwise synchronous.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    actix_rt::System::new().block_on(future)
}

/// Reads an envelope. Success is a 2xx status with `code` 0; anything else
/// becomes the error line `<msg> (<error> <code>, field <field>)`.
pub fn read_envelope(status: u16, body: &[u8]) -> Result<Value, CliError> {
    let envelope: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            let text = String::from_utf8_lossy(body);
            let snippet: String = text.trim().chars().take(200).collect();
            let detail = if snippet.is_empty() {
                String::new()
            } else {
                format!(": {snippet}")
            };
            return Err(CliError::Failed(format!(
                "server answered HTTP {status} without a Caldera envelope{detail}"
            )));
        }
    };
    let code = envelope
        .get("code")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX);
    if code == 0 && (200..300).contains(&status) {
        return Ok(envelope.get("data").cloned().unwrap_or(Value::Null));
    }
    let msg = envelope
        .get("msg")
        .and_then(Value::as_str)
        .unwrap_or("request failed");
    let name = envelope
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("http_error");
    let code_text = if code == u64::MAX {
        format!("HTTP {status}")
    } else {
        code.to_string()
    };
    let field = match envelope.get("field").and_then(Value::as_str) {
        Some(f) => format!(", field {f}"),
        None => String::new(),
    };
    Err(CliError::Api {
        line: format!("{msg} ({name} {code_text}{field})"),
        envelope,
    })
}

/// An answer's `data` read as the view the server declares for it
/// (`caldera_spec::views`). Fields the view does not know are ignored; a
/// field it needs that the answer lacks, or holds as another type, is an
/// error naming the field's path, rather than a table of "-".
pub fn read_view<T: serde::de::DeserializeOwned>(data: &Value) -> Result<T, CliError> {
    serde_path_to_error::deserialize(data).map_err(|e| {
        let path = e.path().to_string();
        let what = std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("answer");
        CliError::Failed(format!(
            "the server's answer is not the {what} this caldera reads: at `{path}`: {}",
            e.into_inner()
        ))
    })
}

/// Percent-encodes one path segment or query value (RFC 3986 unreserved
/// characters pass through), so task ids with odd characters reach the
/// right resource.
pub fn encode(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `?a=1&b=2` from the non-empty pairs, or "" when there are none.
fn query_string(pairs: &[(&str, String)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// Prints `data` as pretty JSON (the `--json` output).
pub fn print_json(data: &Value) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(data)
        .map_err(|e| CliError::Failed(format!("encoding the answer: {e}")))?;
    println!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(status: u16, body: &str) -> String {
        read_envelope(status, body.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_success_envelope_yields_its_data() {
        let body = r#"{"code":0,"msg":"ok","data":{"task_id":"t1"},"request_id":"r1"}"#;
        assert_eq!(
            read_envelope(201, body.as_bytes()).unwrap(),
            json!({"task_id": "t1"})
        );
        assert_eq!(
            read_envelope(200, br#"{"code":0,"msg":"ok"}"#).unwrap(),
            Value::Null
        );
    }

    #[test]
    fn an_error_envelope_names_error_code_and_field() {
        let body = r#"{"code":4001,"error":"invalid_field","msg":"must be HH:MM:SS","field":"duration","request_id":"r"}"#;
        assert_eq!(
            message(400, body),
            "must be HH:MM:SS (invalid_field 4001, field duration)"
        );
        let body = r#"{"code":4010,"error":"unauthorized","msg":"missing bearer token"}"#;
        assert_eq!(
            message(401, body),
            "missing bearer token (unauthorized 4010)"
        );
    }

    #[test]
    fn a_body_that_is_not_an_envelope_is_reported_with_its_status() {
        assert_eq!(
            message(404, ""),
            "server answered HTTP 404 without a Caldera envelope"
        );
        assert_eq!(
            message(502, "Bad Gateway"),
            "server answered HTTP 502 without a Caldera envelope: Bad Gateway"
        );
        assert_eq!(
            message(500, r#"{"msg":"boom"}"#),
            "boom (http_error HTTP 500)"
        );
    }

    #[test]
    fn path_segments_and_queries_are_percent_encoded() {
        assert_eq!(encode("train_2024-07.16~x"), "train_2024-07.16~x");
        assert_eq!(encode("a b/c?"), "a%20b%2Fc%3F");
        assert_eq!(
            query_string(&[("state", "running".into()), ("type", String::new())]),
            "?state=running"
        );
        assert_eq!(query_string(&[("cursor", String::new())]), "");
    }
}
