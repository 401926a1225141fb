//! Webhook subscriptions: a tenant subscribes to its own tenant's events
//! and sees only its own subscriptions (another's is a 404); the operator
//! subscribes to one tenant's events or to all, and sees every subscription.
//! The secret is in the 201 only.
use super::{query_page, Query};
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::webhook::subscriptions::Subscription;
use caldera_actors::webhook::TLS_BUILT_IN;
use caldera_spec::codes;
use caldera_spec::time::rfc3339;
use caldera_spec::webhook::{operator_only, DeliveryRecord, WebhookRecord};
use caldera_spec::webhook_request::{parse_new_webhook, NewWebhook, UrlScheme};
use serde_json::{json, Value};

fn view(w: &WebhookRecord) -> Value {
    json!({"id": w.id, "url": w.url, "events": w.events, "tenant": w.tenant,
        "owner": w.owner.as_deref().unwrap_or("operator"), "from_config": w.from_config,
        "created_at": rfc3339(w.created_ms), "created_at_ms": w.created_ms,
        "after_event_id": w.after_seq})
}

fn delivery_view(d: &DeliveryRecord) -> Value {
    let attempts: Vec<Value> = d
        .attempts
        .iter()
        .map(|a| {
            json!({"at": rfc3339(a.at_ms), "at_ms": a.at_ms, "status": a.status,
            "error": a.error, "duration_ms": a.duration_ms})
        })
        .collect();
    json!({"event_id": d.event_id, "event_type": d.event_type, "state": d.state,
        "created_at": rfc3339(d.created_ms),
        "next_attempt_at": d.next_attempt_ms.map(rfc3339), "next_attempt_ms": d.next_attempt_ms,
        "attempt_count": d.attempt_count, "attempts": attempts})
}

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
pub async fn create(
    user: User,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<Value>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let (w, scheme) = parse_new_webhook(&body)?;
    let s = scoped(&user, w)?;
    if scheme == UrlScheme::Https && !TLS_BUILT_IN {
        return Err(ApiError::new(
            &codes::WEBHOOK_TLS_UNAVAILABLE,
            "this build of Caldera has no TLS client, so an https:// url could never be delivered to; use http:// (e.g. to a forwarding proxy next to the control plane that speaks https onward)",
        )
        .at("url"));
    }
    let rec = st.cp.create_webhook(s).await.map_err(|e| {
        let unknown_tenant = matches!(e, caldera_actors::errors::ActorError::NotFound { .. });
        let e = ApiError::from(e);
        if unknown_tenant {
            e.at("tenant")
        } else {
            e
        }
    })?;
    let mut v = view(&rec);
    v["secret"] = Value::String(rec.secret.clone());
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
pub async fn list(user: User, st: web::Data<AppState>) -> Result<Reply<Value>, ApiError> {
    let all = st.cp.webhooks().await?;
    let mine: Vec<Value> = all.iter().filter(|w| visible(&user, w)).map(view).collect();
    Ok(Reply::ok(json!({ "webhooks": mine })))
}

/// GET /v1/webhooks/{id}
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<Reply<Value>, ApiError> {
    Ok(Reply::ok(view(&visible_webhook(&user, &st, &id).await?)))
}

/// DELETE /v1/webhooks/{id} — with its deliveries.
pub async fn delete(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<Reply<Value>, ApiError> {
    let w = visible_webhook(&user, &st, &id).await?;
    st.cp.delete_webhook(&w.id).await?;
    Ok(Reply::ok(json!({"deleted": w.id})))
}

/// GET /v1/webhooks/{id}/deliveries?after=&limit= — by event id, ascending.
pub async fn deliveries(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<Value>, ApiError> {
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
    let out: Vec<Value> = page.iter().map(delivery_view).collect();
    Ok(Reply::ok(
        json!({"webhook": w.id, "deliveries": out, "next_cursor": next}),
    ))
}
