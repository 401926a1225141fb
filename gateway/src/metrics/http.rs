//! HTTP requests by route and status, with their latency: an actix-web
//! middleware around every route ([`observe`], wrapped outermost in
//! `server.rs`, so requests the per-client cap turns away count too).
//!
//! The route label is the matched pattern (`/v1/tasks/{id}`), never the raw
//! path: a path carries task ids and names, and labelling by it would make a
//! series per task. Each resource is named after its pattern
//! (`routes::resource`), so the middleware reads it with `match_name`
//! without formatting anything; a path no route matches counts as
//! `unmatched`. Patterns are interned once, so recording a request
//! allocates nothing after a route's first request.
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::web;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Request latency: sub-ms for a status read, seconds for a slow node's logs.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The label of requests no route matched.
pub const UNMATCHED: &str = "unmatched";

/// A route pattern, shared by every series of that route.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct Route(Arc<str>);

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: Route,
    pub method: &'static str,
    pub code: u16,
    /// `2xx`, `4xx`, ...
    pub class: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub route: Route,
    pub method: &'static str,
}

/// The HTTP families (handles shared with the registry they are in).
#[derive(Debug, Clone)]
pub struct HttpMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    routes: Arc<RwLock<HashSet<Arc<str>>>>,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        HttpMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS)),
            routes: Default::default(),
        }
    }
}

impl HttpMetrics {
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "caldera_http_requests",
            "HTTP requests answered, by route pattern, method and status",
            self.requests.clone(),
        );
        r.register_with_unit(
            "caldera_http_request_duration",
            "Time from a request's arrival to its response head, by route pattern and method",
            Unit::Seconds,
            self.latency.clone(),
        );
    }

    /// One request answered `status` after `took` seconds.
    pub fn record(&self, route: &str, method: &Method, status: StatusCode, took: f64) {
        let route = self.intern(route);
        let method = method_label(method);
        self.requests
            .get_or_create(&RequestLabels {
                route: route.clone(),
                method,
                code: status.as_u16(),
                class: class_label(status),
            })
            .inc();
        self.latency
            .get_or_create(&LatencyLabels { route, method })
            .observe(took);
    }

    /// The shared copy of `route` (made on its first request).
    fn intern(&self, route: &str) -> Route {
        let known = match self.routes.read() {
            Ok(g) => g.get(route).cloned(),
            Err(p) => p.into_inner().get(route).cloned(),
        };
        if let Some(r) = known {
            return Route(r);
        }
        let mut g = self.routes.write().unwrap_or_else(|p| p.into_inner());
        let r = g.get(route).cloned().unwrap_or_else(|| {
            let r: Arc<str> = route.into();
            g.insert(r.clone());
            r
        });
        Route(r)
    }
}

/// The method as a label: the standard ones by name, any other `OTHER` (a
/// client may send any token as a method; each must not become a series).
fn method_label(m: &Method) -> &'static str {
    const KNOWN: [(Method, &str); 7] = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::PATCH, "PATCH"),
        (Method::HEAD, "HEAD"),
        (Method::OPTIONS, "OPTIONS"),
    ];
    KNOWN
        .iter()
        .find(|(k, _)| k == m)
        .map_or("OTHER", |(_, l)| l)
}

fn class_label(s: StatusCode) -> &'static str {
    match s.as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

/// The middleware: times the request and counts its answer.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let Some(m) = req
        .app_data::<web::Data<crate::state::AppState>>()
        .map(|s| s.metrics.http.clone())
    else {
        return next.call(req).await;
    };
    let method = req.method().clone();
    let began = Instant::now();
    let res = next.call(req).await;
    let took = began.elapsed().as_secs_f64();
    match &res {
        Ok(r) => {
            let route = r.request().match_name().unwrap_or(UNMATCHED);
            m.record(route, &method, r.status(), took);
        }
        Err(e) => m.record(
            UNMATCHED,
            &method,
            e.as_response_error().status_code(),
            took,
        ),
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_pattern_method_and_status() {
        let m = HttpMetrics::default();
        m.record("/v1/tasks/{id}", &Method::GET, StatusCode::OK, 0.002);
        m.record("/v1/tasks/{id}", &Method::GET, StatusCode::OK, 0.2);
        m.record("/v1/tasks/{id}", &Method::GET, StatusCode::NOT_FOUND, 0.001);
        m.record(
            UNMATCHED,
            &Method::from_bytes(b"BREW").unwrap(),
            StatusCode::NOT_FOUND,
            0.001,
        );
        let mut r = Registry::default();
        m.register(&mut r);
        let mut t = String::new();
        prometheus_client::encoding::text::encode(&mut t, &r).unwrap();
        for want in [
            "caldera_http_requests_total{route=\"/v1/tasks/{id}\",method=\"GET\",code=\"200\",class=\"2xx\"} 2\n",
            "caldera_http_requests_total{route=\"/v1/tasks/{id}\",method=\"GET\",code=\"404\",class=\"4xx\"} 1\n",
            "caldera_http_requests_total{route=\"unmatched\",method=\"OTHER\",code=\"404\",class=\"4xx\"} 1\n",
            // 2 ms and 1 ms within 2.5 ms; 200 ms not.
            "caldera_http_request_duration_seconds_bucket{le=\"0.0025\",route=\"/v1/tasks/{id}\",method=\"GET\"} 2\n",
            "caldera_http_request_duration_seconds_count{route=\"/v1/tasks/{id}\",method=\"GET\"} 3\n",
        ] {
            assert!(t.contains(want), "{want} not in\n{t}");
        }
        assert_eq!(m.routes.read().unwrap().len(), 2, "one copy per pattern");
    }
}
