//! Webhook subscriptions: a tenant subscribes to its own tenant's events
//! and sees only its own subscriptions (another's is a 404); the operator
//! subscribes to one tenant's events or to all, and sees every subscription.
//! The secret is in the 201 only.
use super::webhook_views::{DeliveryPage, DeliveryView, WebhookDeleted, WebhookList, WebhookView};
use super::{query_page, Query};
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::webhook::subscriptions::Subscription;
use caldera_spec::webhook::{operator_only, WebhookRecord};
use caldera_spec::webhook_request::{parse_new_webhook, NewWebhook};
use caldera_spec::Envelope;

/// The subscription `w` asks for, as `user` may make it: a tenant's own
/// events only and no node events; the operator's for any tenant or all.
fn scoped(user: &User, w: NewWebhook) -> Result<Subscription, ApiError> {
    let node_event = w.events.iter().position(|n| operator_only(n));
    let Some(own) = user.tenant() else {
        if let (Some(i), Some(_)) = (node_event, &w.tenant) {
            return Err(ApiError::from(caldera_spec::SpecError::new(
                caldera_spec::SpecErrorKind::Conflict,
                format!("events[{i}]"),
                "node events belong to no tenant: a subscription with `tenant` would never hear them; omit `tenant`",
            )));
        }
        return Ok(Subscription {
            url: w.url,
            events: w.events,
            tenant: w.tenant,
            owner: None,
        });
    };
    if w.tenant.as_deref().is_some_and(|t| t != own) {
        return Err(ApiError::forbidden(
            "a tenant token subscribes to its own tenant's events only",
        )
        .at("tenant"));
    }
    if let Some(i) = node_event {
        return Err(ApiError::forbidden(&format!(
            "{:?} events are the operator's: a node's events are not one tenant's",
            w.events[i]
        ))
        .at(format!("events[{i}]")));
    }
    Ok(Subscription {
        url: w.url,
        events: w.events,
        tenant: Some(own.to_string()),
        owner: Some(own.to_string()),
    })
}

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
    let s = scoped(&user, w)?;
    let rec = st.cp.create_webhook(s).await.map_err(|e| {
        let unknown_tenant = matches!(e, caldera_actors::errors::ActorError::NotFound { .. });
        let e = ApiError::from(e);
        if unknown_tenant {
            e.at("tenant")
        } else {
            e
        }
    })?;
    let mut v = WebhookView::of(&rec);
    v.secret = Some(rec.secret.clone());
    Ok(Reply::created(v))
}

/// Whether `user` may see `w`: the operator every one, a tenant its own.
fn visible(user: &User, w: &WebhookRecord) -> bool {
    match user.tenant() {
        None => true,
        Some(t) => w.owner.as_deref() == Some(t),
    }
}

/// The subscription `id` if the caller may see it, else a 404 that does
/// not say whether it exists.
async fn visible_webhook(user: &User, st: &AppState, id: &str) -> Result<WebhookRecord, ApiError> {
    match st.cp.webhook(id).await? {
        Some(w) if visible(user, &w) => Ok(w),
        _ => Err(ApiError::not_found("webhook", id)),
    }
}

/// GET /v1/webhooks — the caller's own (the operator: all).
#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "the caller's subscriptions (the operator: all), without secrets", body = Envelope<WebhookList>)))]
pub async fn list(user: User, st: web::Data<AppState>) -> Result<Reply<WebhookList>, ApiError> {
    let all = st.cp.webhooks().await?;
    let webhooks = all
        .iter()
        .filter(|w| visible(&user, w))
        .map(WebhookView::of)
        .collect();
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
        &visible_webhook(&user, &st, &id).await?,
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
    let w = visible_webhook(&user, &st, &id).await?;
    st.cp.delete_webhook(&w.id).await?;
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
    let w = visible_webhook(&user, &st, &id).await?;
    let (after, limit) = query_page(
        &q,
        "after",
        "after is the event id of the last delivery seen",
    )?;
    let page = st.cp.webhook_deliveries(&w.id, after, limit).await?;
    let next = (page.len() == limit)
        .then(|| page.last().map(|d| d.event_id))
        .flatten();
    Ok(Reply::ok(DeliveryPage {
        webhook: w.id,
        deliveries: page
            .iter()
            .map(|d| DeliveryView::of(d, user.tenant().is_none()))
            .collect(),
        next_cursor: next,
    }))
}
