//! `GET /login`, `POST /login`, `POST /logout`: a pasted operator or tenant
//! token (the API's own tokens) is exchanged for a session cookie, and
//! logout ends the session on the server, so the old cookie is worthless.
//!
//! The login form is protected too (no session exists yet to carry a CSRF
//! token): its page sets a short-lived random cookie and the same value in a
//! hidden field, and a POST must bring both (double submit), so a page of
//! another site cannot log a browser into its attacker's session.
use super::auth::{cookie, read_form, set_cookie, Form, Viewer, SESSION_COOKIE};
use super::error::PortalError;
use super::login_rate::RetryAfter;
use super::respond::{see_other, Render};
use super::session::same_secret;
use crate::routes::Query;
use crate::state::AppState;
use actix_web::http::header::SET_COOKIE;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::tokens::{self, Principal};
use caldera_spec::codes;
use maud::{html, Markup, DOCTYPE};

/// The login form's double-submit cookie.
const LOGIN_COOKIE: &str = "caldera_login";
/// How long a login form stays usable, s.
const LOGIN_FORM_TTL_S: u64 = 600;

/// The login page, with `error` above the field when the last try failed.
fn login_page(nonce: &str, error: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Caldera — log in" }
                link rel="stylesheet" href="/portal/assets/portal.css";
            }
            body data-page="login" {
                main.login {
                    h1 { "Caldera" }
                    p { "Paste an operator or tenant token (the same tokens as the API; "
                        code { "caldera up" } " prints the demo ones)." }
                    form #login-form method="post" action="/login" {
                        input type="hidden" name="login_nonce" value=(nonce);
                        label for="login-token" { "Token" }
                        input #login-token type="password" name="token" autocomplete="off" required autofocus;
                        @if let Some(e) = error {
                            p.field-error #login-error { (e) }
                        }
                        button #login-submit type="submit" { "Log in" }
                    }
                }
            }
        }
    }
}

/// GET /login
#[utoipa::path(get, path = "/login", tag = "portal", operation_id = "portal_login_page",
    description = "The portal's login page: paste an operator or tenant token.",
    responses((status = 200, description = "the login form", content_type = "text/html", body = String)))]
pub async fn page(req: HttpRequest, q: Query) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let nonce = tokens::generate().map_err(|e| {
        PortalError::new(
            &codes::UNAVAILABLE,
            format!("no randomness for the form: {e}"),
        )
    })?;
    let mut reply = HttpResponse::Ok();
    reply.insert_header((
        SET_COOKIE,
        set_cookie(&req, LOGIN_COOKIE, &nonce, LOGIN_FORM_TTL_S),
    ));
    Ok(render.with(reply, login_page(&nonce, None)))
}

/// POST /login — `token=…&login_nonce=…`
#[utoipa::path(post, path = "/login", tag = "portal", operation_id = "portal_login",
    description = "Exchanges a pasted operator or tenant token for a session cookie (HttpOnly, SameSite=Strict) and goes to the overview.",
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "token: the operator's or a tenant's token; login_nonce: the login page's hidden field"),
    responses(
        (status = 303, description = "logged in: the session cookie is set, on to the overview"),
        (status = 400, description = "the body is not a form", content_type = "text/html", body = String),
        (status = 401, description = "the token is not an operator or tenant token (the form again, saying so)", content_type = "text/html", body = String),
        (status = 403, description = "the form lacks its page's cookie: reload the login page", content_type = "text/html", body = String),
        (status = 429, description = "too many logins of this principal, or failed logins from this address, in a minute (the form again, saying when to retry; Retry-After)", content_type = "text/html", body = String),
        (status = 503, description = "the portal holds its most sessions and none is this principal's to end", content_type = "text/html", body = String),
    ))]
pub async fn login(
    req: HttpRequest,
    st: web::Data<AppState>,
    q: Query,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let fields = read_form(&st, payload).await?;
    let nonce = cookie(&req, LOGIN_COOKIE).unwrap_or_default();
    let given = fields.get("login_nonce").map(String::as_str).unwrap_or("");
    if nonce.is_empty() || !same_secret(given, &nonce) {
        return Err(PortalError::new(
            &codes::PORTAL_LOGIN_FORM_STALE,
            "this login form did not come with its page's cookie; reload the login page and paste the token again",
        ));
    }
    let now_ms = st.cp.now_ms();
    let logins = &st.portal.logins;
    let address = req.peer_addr().map(|a| a.ip());
    let token = fields.get("token").map(|t| t.trim()).unwrap_or("");
    let principal = match st.cp.authenticate(token) {
        Some(p @ (Principal::Operator | Principal::Tenant(_))) => p,
        _ => {
            // Only failures count against an address, and only after the
            // token was checked, so a valid token is never held back by
            // someone else's failures from the same address. The limit thus
            // bounds log noise and load, not guessing (tokens are unguessable).
            if let Err(wait) = logins.count_failure(address, now_ms) {
                let msg = format!(
                    "too many failed logins from this address ({} a minute); try again in {} s",
                    logins.per_minute(),
                    wait.0
                );
                return Ok(too_many(&render, &nonce, &msg, wait));
            }
            let msg = "that is not an operator or tenant token (a node join token cannot log in)";
            let mut reply = HttpResponse::Unauthorized();
            reply.insert_header((
                "X-Caldera-Code",
                codes::PORTAL_LOGIN_REFUSED.code.to_string(),
            ));
            return Ok(render.with(reply, login_page(&nonce, Some(msg))));
        }
    };
    if let Err(wait) = logins.count_login(&principal_key(&principal), now_ms) {
        let msg = format!(
            "this token has logged in {} times in the last minute; try again in {} s \
             (your open sessions still work)",
            logins.per_minute(),
            wait.0
        );
        return Ok(too_many(&render, &nonce, &msg, wait));
    }
    let opened = st
        .portal
        .sessions
        .open(principal, now_ms)
        .map_err(|e| PortalError::new(e.code(), e.to_string()))?;
    let ttl_s = st.portal.sessions.ttl_ms() / 1000;
    Ok(HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, "/"))
        .append_header((
            SET_COOKIE,
            set_cookie(&req, SESSION_COOKIE, &opened.id, ttl_s),
        ))
        .append_header((SET_COOKIE, set_cookie(&req, LOGIN_COOKIE, "", 0)))
        .finish())
}

/// The login rate's key of a principal.
fn principal_key(p: &Principal) -> String {
    match p {
        Principal::Tenant(t) => format!("tenant:{t}"),
        Principal::Operator => "operator".to_string(),
        Principal::NodeJoin => "node-join".to_string(),
    }
}

/// A 429: the login form again, saying why and when to try again.
fn too_many(render: &Render, nonce: &str, msg: &str, wait: RetryAfter) -> HttpResponse {
    let mut reply = HttpResponse::TooManyRequests();
    reply
        .insert_header((
            "X-Caldera-Code",
            codes::PORTAL_LOGIN_RATE_LIMITED.code.to_string(),
        ))
        .insert_header((actix_web::http::header::RETRY_AFTER, wait.0.to_string()));
    render.with(reply, login_page(nonce, Some(msg)))
}

/// POST /logout — `csrf=…`
#[utoipa::path(post, path = "/logout", tag = "portal", operation_id = "portal_logout",
    description = "Ends the portal session on the server (its cookie stops working) and goes to the login page.",
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "csrf: the session's CSRF token (every portal form carries it)"),
    responses(
        (status = 303, description = "logged out, or no session: on to the login page"),
        (status = 400, description = "the body is not a form", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token: nothing was changed", content_type = "text/html", body = String),
    ))]
pub async fn logout(
    req: HttpRequest,
    viewer: Viewer,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let form = Form::checked(viewer, &st, payload).await?;
    st.portal.sessions.close(&form.viewer.session_id);
    let mut reply = see_other("/login");
    if let Ok(v) = set_cookie(&req, SESSION_COOKIE, "", 0).parse() {
        reply.headers_mut().insert(SET_COOKIE, v);
    }
    Ok(reply)
}
