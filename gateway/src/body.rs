//! Reading request bodies with a size limit that answers in the envelope.
use crate::envelope;
use actix_web::{web, HttpResponse};
use caldera_spec::SpecErrorKind;
use futures_util::StreamExt;

/// The whole body, or a 413 envelope once it passes `limit`.
pub async fn read(mut payload: web::Payload, limit: usize) -> Result<web::BytesMut, HttpResponse> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            envelope::fail(
                SpecErrorKind::MalformedJson.error_code(),
                &format!("could not read the body: {e}"),
                None,
            )
        })?;
        if body.len() + chunk.len() > limit {
            return Err(envelope::fail(
                SpecErrorKind::TooLarge.error_code(),
                &format!("the body is larger than {limit} bytes"),
                Some("."),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The body of an operator-only request: 401/403 before anything is read.
pub async fn read_as_operator(
    req: &actix_web::HttpRequest,
    st: &crate::state::AppState,
    payload: web::Payload,
) -> Result<web::BytesMut, HttpResponse> {
    crate::auth::operator(req, st)?;
    read(payload, st.max_body_bytes).await
}
