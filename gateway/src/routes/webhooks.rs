//! Webhook subscriptions: a tenant subscribes to its own tenant's events
//! and sees only its own subscriptions (another's is a 404); the operator
//! subscribes to one tenant's events or to all, and sees every subscription.
//! The secret is in the 201 only.
use super::webhook_views::{DeliveryPage, WebhookDeleted, WebhookList, WebhookView};
use super::{query_page, Query};
use crate::api::webhooks as api;
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_spec::webhook_request::{parse_new_webhook, NewWebhook};
use caldera_spec::Envelope;

/// POST /v1/webhooks {url, events, tenant?} — 201 with the secret (once).
#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks",
    description = "Subscribes a url to events: a tenant to its own tenant's, the operator to one tenant's (`tenant`) or all. Deliveries are signed with HMAC-SHA256 (docs/how-to/subscribe-to-webhooks.md says how to check them); the secret is in this answer only.",
    request_body = NewWebhook,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 201, description = "subscribed; `secret` is shown this once", body = Envelope<WebhookView>),
        (status = 400, description = "the body is not a subscription: a bad url, an unknown event name, node events with `tenant` (the field is named); `address_not_allowed` on `url`: credentials in it, plain http to a host not allowed, or a non-public address (webhook-allow-hosts)"),
        (status = 403, description = "a tenant token naming another tenant, or node events"),
        (status = 404, description = "no such tenant"),
        (status = 409, description = "the tenant has webhook-max-per-tenant subscriptions already"),
    ))]
pub async fn create(
    user: User,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<WebhookView>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let (w, _) = parse_new_webhook(&body)?;
    Ok(Reply::created(api::create(&st, &user, w).await?))
}

/// GET /v1/webhooks — the caller's own (the operator: all).
#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "the caller's subscriptions (the operator: all), without secrets", body = Envelope<WebhookList>)))]
pub async fn list(user: User, st: web::Data<AppState>) -> Result<Reply<WebhookList>, ApiError> {
    let webhooks = api::list(&st, &user).await?;
    Ok(Reply::ok(WebhookList { webhooks }))
}

/// GET /v1/webhooks/{id}
#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "the subscription")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the subscription, without its secret", body = Envelope<WebhookView>),
        (status = 404, description = "no such subscription (or another tenant's)"),
    ))]
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<Reply<WebhookView>, ApiError> {
    Ok(Reply::ok(WebhookView::of(
        &api::find(&st, &user, &id).await?,
    )))
}

/// DELETE /v1/webhooks/{id} — with its deliveries.
#[utoipa::path(delete, path = "/v1/webhooks/{id}", tag = "webhooks", operation_id = "webhooks_delete",
    params(("id" = String, Path, description = "the subscription")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "deleted, with its deliveries", body = Envelope<WebhookDeleted>),
        (status = 404, description = "no such subscription (or another tenant's)"),
    ))]
pub async fn delete(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<Reply<WebhookDeleted>, ApiError> {
    let w = api::find(&st, &user, &id).await?;
    api::delete(&st, &w).await?;
    Ok(Reply::ok(WebhookDeleted { deleted: w.id }))
}

/// `GET /v1/webhooks/{id}/deliveries` paging.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveryPaging {
    /// The event id of the last delivery seen.
    #[param(minimum = 0)]
    pub after: Option<u64>,
    /// Deliveries per page (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// GET /v1/webhooks/{id}/deliveries?after=&limit= — by event id, ascending.
#[utoipa::path(get, path = "/v1/webhooks/{id}/deliveries", tag = "webhooks", operation_id = "webhook_deliveries",
    description = "Each delivery's attempts (time, the receiver's status, or why none came), state and next attempt. The operator reads each failure's cause and timing; a tenant reads `delivery failed` for an attempt its receiver did not answer, whatever the cause.",
    params(("id" = String, Path, description = "the subscription"), DeliveryPaging),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "a page of deliveries, by event id", body = Envelope<DeliveryPage>),
        (status = 400, description = "a bad after or limit"),
        (status = 404, description = "no such subscription (or another tenant's)"),
    ))]
pub async fn deliveries(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<DeliveryPage>, ApiError> {
    let w = api::find(&st, &user, &id).await?;
    let (after, limit) = query_page(
        &q,
        "after",
        "after is the event id of the last delivery seen",
    )?;
    Ok(Reply::ok(
        api::deliveries(&st, &user, w, after, limit).await?,
    ))
}
