//! `POST /v1/webhooks`: the body, read and checked. Every refusal names the
//! field (`url`, `events[2]`, `tenant`) so a client can point at it.
use crate::error::{SpecError, SpecErrorKind as K};
use crate::json::parse_json;
use crate::webhook::is_known;
use serde::Deserialize;

/// Longest url accepted.
pub const MAX_URL_LEN: usize = 2048;
/// Most names one subscription may list.
pub const MAX_EVENT_NAMES: usize = 32;

/// A subscription as asked for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    /// Where deliveries are POSTed: an https:// url of a public host, or an
    /// http:// or non-public one the operator allows (webhook-allow-hosts);
    /// no user name or password in it.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "https://hooks.example.com/caldera")
    )]
    pub url: String,
    /// Event names (see `docs/how-to/subscribe-to-webhooks.md`), a family (`task.*`) or `*`.
    #[cfg_attr(feature = "openapi", schema(example = json!(["task.state_changed", "idle.warning"])))]
    pub events: Vec<String>,
    /// The operator only: this tenant's events (absent: every tenant's and the pool's).
    #[serde(default)]
    pub tenant: Option<String>,
}

/// How a webhook url is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlScheme {
    Http,
    Https,
}

/// Parses and checks a `POST /v1/webhooks` body: an absolute http(s) url
/// with a host, and at least one known event name (repeats dropped).
pub fn parse_new_webhook(body: &[u8]) -> Result<(NewWebhook, UrlScheme), SpecError> {
    let mut w: NewWebhook = parse_json(body)?;
    let scheme = check_url(&w.url)?;
    if w.events.is_empty() {
        return Err(SpecError::new(
            K::MissingField,
            "events",
            "name at least one event, e.g. [\"task.failed\"], or [\"*\"] for all",
        ));
    }
    if w.events.len() > MAX_EVENT_NAMES {
        return Err(SpecError::new(
            K::OutOfRange,
            "events",
            format!("at most {MAX_EVENT_NAMES} event names"),
        ));
    }
    for (i, name) in w.events.iter().enumerate() {
        if !is_known(name) {
            let known: Vec<&str> = crate::webhook::EVENT_TYPES
                .iter()
                .map(|(n, _)| *n)
                .collect();
            return Err(SpecError::new(
                K::BadFormat,
                format!("events[{i}]"),
                format!("unknown event {name:?}; known: *, {}", known.join(", ")),
            ));
        }
    }
    let mut seen = std::collections::HashSet::new();
    w.events.retain(|n| seen.insert(n.clone()));
    Ok((w, scheme))
}

/// An absolute `http://` or `https://` url with a host; anything else
/// (`file:`, `unix:`, `gopher:`, a relative path) is refused: the control
/// plane must not be talked into reading local files or sockets for anyone.
pub fn check_url(url: &str) -> Result<UrlScheme, SpecError> {
    let bad = |why: &str| Err(SpecError::new(K::BadFormat, "url", why.to_string()));
    if url.len() > MAX_URL_LEN {
        return bad(&format!("the url is longer than {MAX_URL_LEN} characters"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("the url holds a space or a control character");
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad("the url must be absolute: http://host[:port]/path or https://...");
    };
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => UrlScheme::Http,
        "https" => UrlScheme::Https,
        other => {
            return bad(&format!(
                "scheme {other:?} is not allowed: webhooks are http:// or https:// only"
            ))
        }
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return bad("the url names no host");
    }
    if let Some((_, port)) = host_port.rsplit_once("]:").or_else(|| {
        (!host_port.starts_with('['))
            .then(|| host_port.split_once(':'))
            .flatten()
    }) {
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return bad(&format!("port {port:?} is not a port (1-65535)"));
        }
    }
    Ok(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(body: &str) -> String {
        parse_new_webhook(body.as_bytes()).unwrap_err().field
    }

    #[test]
    fn urls_must_be_absolute_http_or_https_with_a_host() {
        for ok in [
            "http://127.0.0.1:8080/hook",
            "HTTP://example.com",
            "http://user:pw@example.com:81/x?y=1",
            "http://[::1]:9000/h",
        ] {
            assert_eq!(check_url(ok), Ok(UrlScheme::Http), "{ok}");
        }
        assert_eq!(
            check_url("https://hooks.example.com/a"),
            Ok(UrlScheme::Https)
        );
        for bad in [
            "file:///etc/passwd",
            "unix:///var/run/docker.sock",
            "gopher://x",
            "/relative",
            "example.com/hook",
            "http://",
            "http:///path",
            "http://host:0/",
            "http://host:99999/",
            "http://host:abc/",
            "http://ho st/",
        ] {
            let e = check_url(bad).unwrap_err();
            assert_eq!((e.field.as_str(), e.kind), ("url", K::BadFormat), "{bad}");
        }
    }

    #[test]
    fn an_unknown_event_name_is_refused_naming_its_index() {
        assert_eq!(
            field(r#"{"url":"http://h/","events":["task.failed","task.exploded"]}"#),
            "events[1]"
        );
        assert_eq!(field(r#"{"url":"http://h/","events":[]}"#), "events");
        assert_eq!(field(r#"{"url":"ftp://h/","events":["*"]}"#), "url");
        assert_eq!(field(r#"{"url":"http://h/","events":["*"],"x":1}"#), "x");
        let (w, s) =
            parse_new_webhook(br#"{"url":"http://h/","events":["*","idle.warning","*"]}"#).unwrap();
        assert_eq!(
            (w.events, s),
            (
                vec!["*".to_string(), "idle.warning".into()],
                UrlScheme::Http
            )
        );
    }
}
