//! Portal answers: HTML with `Server-Timing: render;dur=<ms>` (what the
//! benchmark reads) and no caching (pages show live state).
use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::HttpResponse;
use maud::Markup;
use std::time::Instant;

/// When a request's rendering started, and whether only its live fragment
/// is wanted (`?fragment=live`: the page's script refreshing it).
pub struct Render {
    started: Instant,
    pub fragment: bool,
}

impl Render {
    pub fn start(q: &std::collections::HashMap<String, String>) -> Render {
        Render {
            started: Instant::now(),
            fragment: q.get("fragment").is_some_and(|f| f == "live"),
        }
    }

    /// A 200 with `markup`.
    pub fn html(&self, markup: Markup) -> HttpResponse {
        self.with(HttpResponse::Ok(), markup)
    }

    /// `builder`'s status with `markup`, timed.
    pub fn with(
        &self,
        mut builder: actix_web::HttpResponseBuilder,
        markup: Markup,
    ) -> HttpResponse {
        let body = markup.into_string();
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        builder
            .insert_header((CONTENT_TYPE, "text/html; charset=utf-8"))
            .insert_header((CACHE_CONTROL, "no-store"))
            .insert_header(("Server-Timing", format!("render;dur={ms:.2}")))
            .body(body)
    }

    /// The whole page, or only its live part when that is what was asked.
    pub fn page(&self, whole: impl FnOnce(Markup) -> Markup, live: Markup) -> HttpResponse {
        if self.fragment {
            self.html(live)
        } else {
            self.html(whole(live))
        }
    }
}

/// A 303 to `to` (after a form: the browser then GETs the result).
pub fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, to))
        .finish()
}

/// What every page answers besides its own errors, for `/openapi.json`.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // a description only: the handlers answer HTML
pub enum PageAnswers {
    /// the page
    #[response(status = 200, content_type = "text/html")]
    Page(String),
    /// no session: on to the login page
    #[response(status = 303)]
    ToLogin,
    /// fragment=live without a session (the script then goes to the login)
    #[response(status = 401, content_type = "text/html")]
    NoSession(String),
}

/// `?fragment=live`, which every page takes, for `/openapi.json`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // a description only: [`Render::start`] reads it
pub struct Live {
    /// `live`: only the part the page refreshes.
    fragment: Option<String>,
}
