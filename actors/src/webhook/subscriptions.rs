//! Making subscriptions: a new one from the API, and the one the
//! `webhooks.idle-url` config key stands for, kept in step with the config
//! at every start.
use crate::config::ServerConfig;
use crate::errors::{ActorError, Result};
use caldera_spec::webhook::WebhookRecord;
use caldera_storage::Store;

/// `m/` key naming the subscription made for `webhooks.idle-url`.
const META_IDLE_WEBHOOK: &str = "idle_webhook_id";

/// A fresh subscription id (`wh-` and 16 hex digits) and secret (32 random
/// bytes, hex).
fn fresh_id_and_secret() -> Result<(String, String)> {
    let no_random = |e| ActorError::Unavailable(format!("no randomness for a webhook: {e}"));
    let id = crate::tokens::generate().map_err(no_random)?;
    let secret = crate::tokens::generate().map_err(no_random)?;
    Ok((format!("wh-{}", &id[..16]), secret))
}

/// What a subscription is asked to be.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub url: String,
    pub events: Vec<String>,
    /// Only this tenant's events (None: all, the operator's only).
    pub tenant: Option<String>,
    /// The tenant that asks (None: the operator).
    pub owner: Option<String>,
}

/// A new record for `s`, hearing only events after the newest one now.
pub fn new_record(store: &Store, s: Subscription, now_ms: u64) -> Result<WebhookRecord> {
    let (id, secret) = fresh_id_and_secret()?;
    Ok(WebhookRecord {
        id,
        url: s.url,
        events: s.events,
        tenant: s.tenant,
        owner: s.owner,
        secret,
        created_ms: now_ms,
        after_seq: store.last_event_seq(),
        from_config: false,
    })
}

/// At start: the operator subscription to `idle.warning` for
/// `webhooks.idle-url` exists, with that url (and `webhooks.idle-secret`
/// when set), exactly once across restarts; with the key gone, it goes too.
/// Durable before the dispatcher starts. A generated secret is logged this
/// once (the only way to learn it, as with tokens).
pub fn ensure_idle_subscription(store: &Store, config: &ServerConfig, now_ms: u64) -> Result<()> {
    let known = match store.meta_get(META_IDLE_WEBHOOK)? {
        Some(id) => store.webhook(&String::from_utf8_lossy(&id))?,
        None => None,
    };
    let b = match (&config.webhooks.idle_url, known) {
        (None, None) => return Ok(()),
        (None, Some(old)) => {
            let mut b = store.forget_webhook(&old.id)?;
            b.meta_remove(META_IDLE_WEBHOOK);
            tracing::info!(webhook = %old.id, "webhooks.idle-url is no longer set: its subscription was removed");
            b
        }
        (Some(url), Some(mut rec)) => {
            let secret = config
                .webhooks
                .idle_secret
                .clone()
                .unwrap_or(rec.secret.clone());
            if rec.url == *url && rec.secret == secret {
                return Ok(());
            }
            rec.url = url.clone();
            rec.secret = secret;
            let mut b = store.batch();
            b.put_webhook(&rec);
            tracing::info!(webhook = %rec.id, %url, "webhooks.idle-url subscription updated");
            b
        }
        (Some(url), None) => {
            let s = Subscription {
                url: url.clone(),
                events: vec!["idle.warning".into()],
                tenant: None,
                owner: None,
            };
            let mut rec = new_record(store, s, now_ms)?;
            rec.from_config = true;
            match &config.webhooks.idle_secret {
                Some(secret) => rec.secret = secret.clone(),
                None => tracing::warn!(
                    webhook = %rec.id, %url, secret = %rec.secret,
                    "webhooks.idle-url is now webhook subscription {}; its deliveries are signed with this secret, shown this once (set webhooks.idle-secret to choose it)",
                    rec.id
                ),
            }
            let mut b = store.batch();
            b.put_webhook(&rec);
            b.meta_put(META_IDLE_WEBHOOK, rec.id.as_bytes());
            b
        }
    };
    store.commit(b)?;
    store.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: Option<&str>, secret: Option<&str>) -> ServerConfig {
        let mut c = ServerConfig::default();
        c.webhooks.idle_url = url.map(str::to_string);
        c.webhooks.idle_secret = secret.map(str::to_string);
        c
    }

    #[test]
    fn the_idle_subscription_is_made_once_follows_the_config_and_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Default::default()).unwrap();
        let c = config(Some("http://127.0.0.1:9/idle"), None);
        ensure_idle_subscription(&store, &c, 1).unwrap();
        ensure_idle_subscription(&store, &c, 2).unwrap();
        let subs = store.webhooks().unwrap();
        assert_eq!(subs.len(), 1, "idempotent across starts");
        let first = subs[0].clone();
        assert_eq!(first.events, vec!["idle.warning"]);
        assert!(first.from_config && first.tenant.is_none() && first.owner.is_none());
        assert_eq!(first.secret.len(), 64);
        // A new url and a configured secret update the same subscription.
        let c = config(Some("http://127.0.0.1:10/idle"), Some("0123456789abcdef"));
        ensure_idle_subscription(&store, &c, 3).unwrap();
        let subs = store.webhooks().unwrap();
        assert_eq!(subs.len(), 1);
        assert_eq!(
            (subs[0].id.as_str(), subs[0].url.as_str()),
            (first.id.as_str(), "http://127.0.0.1:10/idle")
        );
        assert_eq!(subs[0].secret, "0123456789abcdef");
        // The key removed: the subscription goes.
        ensure_idle_subscription(&store, &config(None, None), 4).unwrap();
        assert!(store.webhooks().unwrap().is_empty());
    }
}
