//! Every error answer in the envelope, also those the gateway's own handlers
//! did not write: actix-web's extractors and payload readers answer with
//! empty or plain-text bodies, which a client cannot branch on. This
//! middleware rewrites any error answer that is neither the envelope (JSON)
//! nor a portal page (HTML) into the envelope, with the registered code of
//! its status and the original text, if any, as the message. Errors the HTTP
//! parser answers before a request exists are rewritten on the connection
//! instead (`parser_errors`).
//!
//! It also closes the connection after an answer to HEAD: HTTP/1 sends a
//! HEAD answer's headers but not its body, so its `content-length` describes
//! bytes never sent, and whoever follows the connection's answers
//! (`parser_errors`) could not know where the next one starts. No route
//! answers HEAD (each is 404 or 405), so nothing is lost.
use crate::envelope::request_id;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::http::{ConnectionType, Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::HttpResponse;
use caldera_spec::codes::{self, ErrorCode};
use caldera_spec::Envelope;

/// Longest original body kept as the message, bytes.
const MAX_TEXT: u64 = 2048;

/// The registered code an error answer of `status` carries when nothing
/// more specific said which.
pub fn code_for_status(status: StatusCode) -> &'static ErrorCode {
    match status.as_u16() {
        400 => &codes::MALFORMED_REQUEST,
        404 => &codes::NOT_FOUND,
        405 => &codes::METHOD_NOT_ALLOWED,
        408 => &codes::REQUEST_TIMEOUT,
        413 => &codes::BODY_TOO_LARGE,
        429 => &codes::TOO_MANY_REQUESTS,
        431 => &codes::HEAD_TOO_LARGE,
        500 => &codes::INTERNAL,
        s => codes::ALL
            .iter()
            .find(|c| c.http_status == s)
            .unwrap_or(if s >= 500 {
                &codes::UNAVAILABLE
            } else {
                &codes::MALFORMED_REQUEST
            }),
    }
}

/// The sentence for an error of `status` that came without one.
pub fn default_message(status: StatusCode) -> String {
    match status.as_u16() {
        400 => "the request could not be parsed: a header, the Content-Length, the request \
                line or the path is malformed (a path is UTF-8, percent-encoded)"
            .to_string(),
        408 => "the request did not arrive in time (limits.client-request-timeout-ms)".to_string(),
        413 => "the request's body is larger than the server accepts".to_string(),
        431 => "the request's head is larger than the server reads: more than 128 KiB of \
                request line (path and query string) and headers, or more than 96 headers"
            .to_string(),
        _ => format!(
            "the request was refused: {}",
            status.canonical_reason().unwrap_or("an HTTP error")
        ),
    }
}

/// The envelope's JSON for an error of `status`, `msg` its sentence.
pub fn envelope_json(status: StatusCode, msg: String) -> Vec<u8> {
    let body = Envelope::<()>::failure(code_for_status(status), msg, None, request_id());
    // An envelope of strings and numbers always serialises.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Whether an answer is one of the gateway's own: the envelope or a page.
fn is_ours(res: &ServiceResponse<impl MessageBody>) -> bool {
    res.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json") || t.starts_with("text/html"))
}

/// The middleware (`actix_web::middleware::from_fn`).
pub async fn wrap(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let head = req.method() == Method::HEAD;
    let res = next.call(req).await?;
    let res = if res.status().is_client_error() || res.status().is_server_error() {
        if is_ours(&res) {
            res.map_into_boxed_body()
        } else {
            into_envelope(res).await
        }
    } else {
        res.map_into_boxed_body()
    };
    let mut res = res;
    if head {
        res.response_mut()
            .head_mut()
            .set_connection_type(ConnectionType::Close);
    }
    Ok(res)
}

/// `res` as the envelope: same status and headers, its text as the message.
async fn into_envelope(res: ServiceResponse<impl MessageBody>) -> ServiceResponse<BoxBody> {
    let status = res.status();
    let (req, res) = res.into_parts();
    let mut headers = res.headers().clone();
    let small = matches!(res.body().size(), BodySize::Sized(n) if n <= MAX_TEXT);
    let text = if small {
        actix_web::body::to_bytes(res.into_body())
            .await
            .ok()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .filter(|t| !t.is_empty())
    } else {
        None
    };
    let msg = text.unwrap_or_else(|| default_message(status));
    headers.remove(CONTENT_TYPE);
    headers.remove(CONTENT_LENGTH);
    let mut reply = HttpResponse::build(status);
    for (name, value) in headers.iter() {
        reply.append_header((name.clone(), value.clone()));
    }
    let reply = reply
        .content_type("application/json")
        .body(envelope_json(status, msg));
    ServiceResponse::new(req, reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_status_gets_a_code_of_that_status() {
        for s in [400u16, 404, 405, 408, 413, 429, 431, 500, 503] {
            let status = StatusCode::from_u16(s).unwrap();
            assert_eq!(code_for_status(status).http_status, s, "{s}");
        }
        let teapot = StatusCode::from_u16(418).unwrap();
        assert_eq!(code_for_status(teapot).code, codes::MALFORMED_REQUEST.code);
    }

    #[actix_web::test]
    async fn an_error_without_the_envelope_gets_it_and_pages_stay_pages() {
        use actix_web::{test, web, App};
        let app = test::init_service(
            App::new()
                .wrap(actix_web::middleware::from_fn(wrap))
                .route(
                    "/empty",
                    web::get().to(|| async { HttpResponse::BadRequest().finish() }),
                )
                .route(
                    "/text",
                    web::get().to(|| async {
                        HttpResponse::PayloadTooLarge().body("Payload reached size limit.")
                    }),
                )
                .route(
                    "/page",
                    web::get().to(|| async {
                        HttpResponse::NotFound()
                            .content_type("text/html; charset=utf-8")
                            .body("<p>no such page</p>")
                    }),
                ),
        )
        .await;
        let get = |path: &str| test::TestRequest::get().uri(path).to_request();
        let res = test::call_service(&app, get("/empty")).await;
        assert_eq!(res.status(), 400);
        let json: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(json["code"], 40030, "{json}");
        assert!(json["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("could not be parsed"));
        let res = test::call_service(&app, get("/text")).await;
        assert_eq!(res.status(), 413);
        let json: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(json["code"], 41301, "{json}");
        assert_eq!(json["msg"], "Payload reached size limit.");
        let res = test::call_service(&app, get("/page")).await;
        assert_eq!(test::read_body(res).await, "<p>no such page</p>");
        let head = test::TestRequest::default()
            .method(Method::HEAD)
            .uri("/empty")
            .to_request();
        let res = test::call_service(&app, head).await;
        assert_eq!(
            res.response().head().connection_type(),
            ConnectionType::Close,
            "a HEAD answer ends its connection"
        );
    }

    #[test]
    fn the_envelope_names_its_code() {
        let json: serde_json::Value =
            serde_json::from_slice(&envelope_json(StatusCode::BAD_REQUEST, "x".into())).unwrap();
        assert_eq!(json["code"], 40030);
        assert_eq!(json["error"], "malformed_request");
        assert_eq!(json["msg"], "x");
    }
}
