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
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{
    HeaderName, HeaderValue, CONTENT_SECURITY_POLICY, REFERRER_POLICY, STRICT_TRANSPORT_SECURITY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use actix_web::middleware::Next;

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
    let mut res = next.call(req).await?;
    for (name, value) in headers {
        res.headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    Ok(res)
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
