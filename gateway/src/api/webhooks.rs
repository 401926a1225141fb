//! Webhook subscriptions: a tenant subscribes to its own tenant's events
//! and sees only its own subscriptions (another's is a 404); the operator
//! subscribes to one tenant's events or to all, and sees every subscription.
use crate::error::ApiError;
use crate::principal::User;
use crate::routes::webhook_views::{DeliveryPage, DeliveryView, WebhookView};
use crate::state::AppState;
use caldera_actors::webhook::subscriptions::Subscription;
use caldera_spec::webhook::{operator_only, WebhookRecord};
use caldera_spec::webhook_request::NewWebhook;

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

/// Subscribes as `w` asks, within what the caller may subscribe to: the
/// subscription with its secret (shown this once).
pub async fn create(st: &AppState, caller: &User, w: NewWebhook) -> Result<WebhookView, ApiError> {
    let s = scoped(caller, w)?;
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
    Ok(v)
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
pub async fn find(st: &AppState, user: &User, id: &str) -> Result<WebhookRecord, ApiError> {
    match st.cp.webhook(id).await? {
        Some(w) if visible(user, &w) => Ok(w),
        _ => Err(ApiError::not_found("webhook", id)),
    }
}

/// The caller's subscriptions (the operator: all), without secrets.
pub async fn list(st: &AppState, caller: &User) -> Result<Vec<WebhookView>, ApiError> {
    let all = st.cp.webhooks().await?;
    Ok(all
        .iter()
        .filter(|w| visible(caller, w))
        .map(WebhookView::of)
        .collect())
}

/// Deletes the subscription (one [`find`] gave), with its deliveries.
pub async fn delete(st: &AppState, w: &WebhookRecord) -> Result<(), ApiError> {
    Ok(st.cp.delete_webhook(&w.id).await?)
}

/// A page of the subscription's deliveries after event `after`; the
/// operator reads each failure's cause, a tenant only that it failed.
pub async fn deliveries(
    st: &AppState,
    caller: &User,
    w: WebhookRecord,
    after: u64,
    limit: usize,
) -> Result<DeliveryPage, ApiError> {
    let page = st.cp.webhook_deliveries(&w.id, after, limit).await?;
    let next = (page.len() == limit)
        .then(|| page.last().map(|d| d.event_id))
        .flatten();
    Ok(DeliveryPage {
        webhook: w.id,
        deliveries: page
            .iter()
            .map(|d| DeliveryView::of(d, caller.tenant().is_none()))
            .collect(),
        next_cursor: next,
    })
}
