//! Reading request bodies with a size limit that answers in the envelope.
use crate::error::ApiError;
use actix_web::web;
use caldera_spec::SpecErrorKind;
use futures_util::StreamExt;

/// The whole body, or a 413 once it passes `limit` (the rest is never read).
pub async fn read(mut payload: web::Payload, limit: usize) -> Result<web::BytesMut, ApiError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(
                SpecErrorKind::MalformedJson.error_code(),
                format!("could not read the body: {e}"),
            )
        })?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::new(
                SpecErrorKind::TooLarge.error_code(),
                format!("the body is larger than {limit} bytes"),
            )
            .at("."));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
