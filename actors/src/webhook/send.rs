//! One delivery attempt over HTTP: the address checked against the
//! outbound policy (`target.rs`), then the signed POST to that address.
use super::payload;
use super::target::{checked_address, Reader, Resolve};
use caldera_spec::outbound::OutboundPolicy;
use caldera_spec::webhook::WebhookRecord;
use caldera_spec::Event;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What an attempt may reach, and how names are resolved.
#[derive(Clone)]
pub struct Route {
    pub policy: Arc<OutboundPolicy>,
    pub resolver: Arc<dyn Resolve>,
}

/// What came of one attempt: the receiver's status, or why there was none
/// (kept in full for the operator; a tenant sees it without detail).
pub struct Answer {
    pub status: Option<u16>,
    pub error: Option<String>,
    pub took_ms: u64,
}

/// The HTTP client of the deliveries: the attempt timeout, no redirects
/// followed (a 3xx is not a 2xx: it is retried, and shown), TLS for
/// `https://` urls trusting the host's store and `webhooks.ca-file`, and
/// room for `connections` at once (the dispatcher's own limits decide
/// who gets them, not the pool's).
pub fn client(
    timeout_ms: u64,
    ca_file: Option<&std::path::Path>,
    connections: usize,
) -> awc::Client {
    let builder = awc::Client::builder()
        .timeout(Duration::from_millis(timeout_ms))
        .disable_redirects();
    let connector = awc::Connector::new()
        .timeout(Duration::from_millis(timeout_ms))
        .limit(connections.max(1));
    // The config was checked at start (`WebhooksSection::validate`); should the file
    // have gone bad since, the host's store alone still serves public urls.
    let tls = caldera_tls::client_config(ca_file, "webhooks.ca-file").or_else(|e| {
        tracing::warn!("webhook TLS: {e}; trusting the host's certificate store only");
        caldera_tls::client_config(None, "webhooks.ca-file")
    });
    match tls {
        Ok(tls) => builder.connector(connector.rustls_0_23(tls)).finish(),
        Err(e) => {
            tracing::warn!("webhook TLS: {e}; https urls will fail");
            builder.connector(connector).finish()
        }
    }
}

/// POSTs one delivery of event `e` (as `kind`) to subscription `s`.
pub async fn post(
    client: awc::Client,
    route: Route,
    s: WebhookRecord,
    e: Event,
    kind: String,
) -> Answer {
    let started = Instant::now();
    let took = |started: Instant| started.elapsed().as_millis() as u64;
    let addr = match checked_address(
        &route.policy,
        route.resolver.as_ref(),
        &s.url,
        // The record keeps the cause for the operator; a tenant's view of
        // it reads `delivery failed` whatever it was.
        Reader::Operator,
    )
    .await
    {
        Ok(addr) => addr,
        Err(refusal) => {
            return Answer {
                status: None,
                error: Some(format!("not sent: {refusal}")),
                took_ms: took(started),
            }
        }
    };
    let body = payload::body(&e, &kind);
    let t = crate::clock::now_ms() / 1000;
    let mut req = client.post(&s.url).address(addr);
    for (name, value) in payload::headers(&s.id, &e, &s.secret, t, &body) {
        req = req.insert_header((name, value));
    }
    let result = req.send_body(body).await;
    match result {
        Ok(resp) => Answer {
            status: Some(resp.status().as_u16()),
            error: None,
            took_ms: took(started),
        },
        Err(err) => Answer {
            status: None,
            error: Some(err.to_string()),
            took_ms: took(started),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::target::tests::Table;
    use caldera_spec::EventKind;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A loopback receiver that counts connections and answers 204.
    fn receiver() -> (u16, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let _ = s.read(&mut buf);
                let _ = s.write_all(
                    b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        (port, seen)
    }

    fn sub(url: String) -> WebhookRecord {
        WebhookRecord {
            id: "wh-0123456789abcdef".into(),
            url,
            events: vec!["*".into()],
            tenant: Some("acme".into()),
            owner: Some("acme".into()),
            secret: "00".into(),
            created_ms: 0,
            after_seq: 0,
            from_config: false,
        }
    }

    fn event() -> Event {
        let mut e = Event::new(1, EventKind::TaskSubmitted, "submitted").tenant("acme");
        e.seq = 7;
        e
    }

    /// `receiver.test` exists only in the test's table: a POST that reaches
    /// the loopback receiver went to the address the table gave and the
    /// policy passed, not to one the client looked up itself.
    #[actix_rt::test]
    async fn an_attempt_connects_to_the_checked_address_and_nowhere_else() {
        let (port, seen) = receiver();
        let url = format!("http://receiver.test:{port}/hook");
        let route = |allow: &str| Route {
            policy: Arc::new(OutboundPolicy::parse(allow).unwrap()),
            resolver: Arc::new(Table::with(&[("receiver.test", "127.0.0.1")])),
        };
        let c = client(2000, None, 4);
        // The operator allows the name: it is reached at the table's address.
        let ok = post(
            c.clone(),
            route("receiver.test"),
            sub(url),
            event(),
            "task.submitted".into(),
        )
        .await;
        assert_eq!((ok.status, ok.error), (Some(204), None));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        // Not allowed: https to a name that resolves to the loopback is
        // refused before any connection is made.
        let tls_url = format!("https://receiver.test:{port}/hook");
        let no = post(c, route(""), sub(tls_url), event(), "task.submitted".into()).await;
        assert_eq!(no.status, None);
        let why = no.error.unwrap_or_default();
        assert!(
            why.starts_with("not sent:") && why.contains("receiver.test"),
            "{why}"
        );
        assert_eq!(seen.load(Ordering::SeqCst), 1, "no second connection");
    }
}
