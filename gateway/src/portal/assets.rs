//! `GET /portal/assets/{file}`: the portal's script and stylesheet, embedded
//! in the binary (no CDN, no build step) and cached by the browser for a day
//! (they change only with the binary).
use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{web, HttpResponse};

/// One embedded file: its name, media type and bytes.
struct Asset {
    name: &'static str,
    media_type: &'static str,
    bytes: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "portal.js",
        media_type: "text/javascript; charset=utf-8",
        bytes: include_str!("assets/portal.js"),
    },
    Asset {
        name: "portal.css",
        media_type: "text/css; charset=utf-8",
        bytes: include_str!("assets/portal.css"),
    },
];

/// GET /portal/assets/{file}
#[utoipa::path(get, path = "/portal/assets/{file}", tag = "portal", operation_id = "portal_asset",
    description = "The portal's script and stylesheet.",
    params(("file" = String, Path, description = "portal.js or portal.css")),
    responses(
        (status = 200, description = "the file", content((String = "text/javascript"), (String = "text/css"))),
        (status = 404, description = "no such file"),
    ))]
pub async fn asset(file: web::Path<String>) -> Result<HttpResponse, crate::ApiError> {
    let Some(a) = ASSETS.iter().find(|a| a.name == file.as_str()) else {
        return Err(crate::ApiError::not_found("portal file", &file));
    };
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, a.media_type))
        .insert_header((CACHE_CONTROL, "public, max-age=86400"))
        .body(a.bytes))
}
