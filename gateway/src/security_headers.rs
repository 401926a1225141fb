//! Headers that tell a browser how to treat every answer: the portal is a
//! page people log into, so another site must not frame it (clickjacking),
//! guess a JSON or log answer into HTML (sniffing), learn its URLs from the
//! Referer, or run script the portal did not ship.
//!
//! The policy fits what the portal serves: one script and one stylesheet
//! from `/portal/assets/` (no inline script, no `eval`), `fetch` of its own
//! pages for the live refresh, forms posting to itself, and `style`
//! attributes for the widths of its memory and quota bars (allowed by
//! `style-src-attr` only; no `<style>` element is). `/docs` (Swagger UI, one
//! inline script of its own) gets every header but the policy.
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{
    HeaderMap, HeaderName, HeaderValue, CONTENT_SECURITY_POLICY, REFERRER_POLICY,
    STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{HttpResponse, ResponseError};

/// The portal's Content-Security-Policy.
pub const CONTENT_SECURITY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; \
    connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// HSTS for answers over https: a year, subdomains left to their owners.
pub const TRANSPORT_SECURITY: &str = "max-age=31536000";

/// Whether `path` is the API docs' (they carry their own inline script).
fn is_docs(path: &str) -> bool {
    path == "/docs" || path.starts_with("/docs/")
}

/// The headers for an answer to `path`, `https` when the request came over
/// TLS (directly or as a proxy's `Forwarded`/`X-Forwarded-Proto` says).
pub fn for_answer(path: &str, https: bool) -> Vec<(HeaderName, &'static str)> {
    let mut headers = vec![
        (X_FRAME_OPTIONS, "DENY"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (REFERRER_POLICY, "no-referrer"),
    ];
    if !is_docs(path) {
        headers.push((CONTENT_SECURITY_POLICY, CONTENT_SECURITY));
    }
    if https {
        headers.push((STRICT_TRANSPORT_SECURITY, TRANSPORT_SECURITY));
    }
    headers
}

/// The middleware (`actix_web::middleware::from_fn`): every answer, errors
/// and refusals of other middleware included, gets the headers.
pub async fn add(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let https = req.connection_info().scheme() == "https";
    let headers = for_answer(req.path(), https);
    match next.call(req).await {
        Ok(mut res) => {
            insert(res.headers_mut(), &headers);
            Ok(res)
        }
        // The request went inward with the call, so the answer cannot be
        // built here; actix builds it from the error once every middleware
        // has run, and `WithHeaders` adds the headers when it does.
        Err(error) => Err(WithHeaders { error, headers }.into()),
    }
}

fn insert(map: &mut HeaderMap, headers: &[(HeaderName, &'static str)]) {
    for (name, value) in headers {
        map.insert(name.clone(), HeaderValue::from_static(value));
    }
}

/// An error from further in, whose answer carries the headers too.
#[derive(Debug)]
struct WithHeaders {
    error: actix_web::Error,
    headers: Vec<(HeaderName, &'static str)>,
}

impl std::fmt::Display for WithHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl ResponseError for WithHeaders {
    fn status_code(&self) -> StatusCode {
        self.error.as_response_error().status_code()
    }

    fn error_response(&self) -> HttpResponse<BoxBody> {
        let mut res = self.error.error_response();
        insert(res.headers_mut(), &self.headers);
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(path: &str, https: bool) -> Vec<String> {
        for_answer(path, https)
            .into_iter()
            .map(|(n, _)| n.as_str().to_string())
            .collect()
    }

    #[test]
    fn hsts_only_over_https_and_no_policy_for_the_docs() {
        let plain = names("/tasks", false);
        assert!(plain.contains(&"content-security-policy".to_string()));
        assert!(!plain.contains(&"strict-transport-security".to_string()));
        assert!(names("/tasks", true).contains(&"strict-transport-security".to_string()));
        let docs = names("/docs/swagger-ui.css", false);
        assert!(!docs.contains(&"content-security-policy".to_string()));
        assert!(docs.contains(&"x-frame-options".to_string()));
    }

    /// A middleware further in that refuses with an error, not an answer.
    async fn refuse(
        _req: ServiceRequest,
        _next: Next<impl MessageBody>,
    ) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
        Err(actix_web::error::ErrorTooManyRequests("slow down"))
    }

    #[actix_web::test]
    async fn an_error_from_further_in_gets_the_headers_too() {
        use actix_web::dev::Service;
        use actix_web::{test, web, App};
        let app = test::init_service(
            App::new()
                .wrap(actix_web::middleware::from_fn(refuse))
                .wrap(actix_web::middleware::from_fn(add))
                .route("/tasks", web::get().to(HttpResponse::Ok)),
        )
        .await;
        let req = test::TestRequest::get().uri("/tasks").to_request();
        let Err(e) = app.call(req).await else {
            panic!("the inner middleware refuses every request");
        };
        // What the server sends for an error that reached it.
        let res = e.error_response();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        for (name, value) in for_answer("/tasks", false) {
            assert_eq!(
                res.headers().get(&name).and_then(|v| v.to_str().ok()),
                Some(value),
                "{name}"
            );
        }
    }

    #[test]
    fn the_policy_allows_no_inline_script_and_no_framing() {
        let script = CONTENT_SECURITY
            .split(';')
            .map(str::trim)
            .find(|d| d.starts_with("script-src"))
            .unwrap_or_default();
        assert_eq!(script, "script-src 'self'");
        assert!(CONTENT_SECURITY.contains("frame-ancestors 'none'"));
    }
}
