//! `GET /docs`: Swagger UI, from files vendored in `gateway/assets/` and
//! embedded in the binary: the page works offline and the build downloads
//! nothing (gateway/assets/README.md says which version and license).
use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{web, HttpResponse};

/// One embedded file: its name under `/docs/`, its media type, its bytes.
struct Asset {
    name: &'static str,
    media_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "swagger-ui-bundle.js",
        media_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../assets/swagger-ui/swagger-ui-bundle.js"),
    },
    Asset {
        name: "swagger-ui.css",
        media_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../assets/swagger-ui/swagger-ui.css"),
    },
];

const PAGE: &[u8] = include_bytes!("../../assets/docs.html");

/// GET /docs
#[utoipa::path(get, path = "/docs", tag = "docs", operation_id = "docs",
    description = "Interactive API docs (Swagger UI, served by this server; no network needed).",
    responses((status = 200, description = "the docs page", content_type = "text/html", body = String)))]
pub async fn page() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "text/html; charset=utf-8"))
        .body(PAGE)
}

/// GET /docs/{file}
#[utoipa::path(get, path = "/docs/{file}", tag = "docs", operation_id = "docs_file",
    description = "The docs page's script and stylesheet.",
    params(("file" = String, Path, description = "swagger-ui-bundle.js or swagger-ui.css")),
    responses(
        (status = 200, description = "the file", content((String = "text/javascript"), (String = "text/css"))),
        (status = 404, description = "no such file"),
    ))]
pub async fn asset(file: web::Path<String>) -> Result<HttpResponse, crate::ApiError> {
    let Some(a) = ASSETS.iter().find(|a| a.name == file.as_str()) else {
        return Err(crate::ApiError::not_found("docs file", &file));
    };
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, a.media_type))
        // The files change only with the binary.
        .insert_header((CACHE_CONTROL, "public, max-age=86400"))
        .body(a.bytes))
}
