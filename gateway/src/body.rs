//! Reading request bodies with a size limit and a deadline, answering in the
//! envelope: a body that never comes must not hold a connection (a thousand
//! stalled uploads would otherwise hold a thousand connections for as long as
//! their clients like).
use crate::error::ApiError;
use actix_web::web;
use caldera_spec::codes;
use caldera_spec::SpecErrorKind;
use futures_util::StreamExt;
use std::time::Duration;

/// How large a body may be and how long it may take to arrive.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit {
    pub bytes: usize,
    pub timeout: Duration,
}

/// The whole body; a 413 once it passes the size limit (the rest is never
/// read); a 408 when it has not all arrived within the timeout.
pub async fn read(payload: web::Payload, limit: BodyLimit) -> Result<web::BytesMut, ApiError> {
    match tokio::time::timeout(limit.timeout, read_all(payload, limit.bytes)).await {
        Ok(body) => body,
        Err(_) => Err(ApiError::new(
            &codes::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {} ms (limits.client-request-timeout-ms)",
                limit.timeout.as_millis()
            ),
        )),
    }
}

async fn read_all(mut payload: web::Payload, limit: usize) -> Result<web::BytesMut, ApiError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| {
            // The transport's framing broke (a bad chunk, a body shorter
            // than its Content-Length): not the JSON's fault.
            ApiError::new(
                &codes::MALFORMED_REQUEST,
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
