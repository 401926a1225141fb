//! The facade's webhook operations: subscribe, list, show, delete, and a
//! subscription's deliveries. Who may see which subscription is the
//! gateway's call (it knows the caller); here each one is read or written,
//! always off the async workers, and made durable before it is answered.
use super::{blocking, ControlPlane};
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use crate::webhook::subscriptions::{new_record, Subscription};
use crate::webhook::target::{check_new, Reader, SystemResolver};
use caldera_spec::webhook::{DeliveryRecord, WebhookRecord};
use caldera_spec::{SpecError, SpecErrorKind};

impl ControlPlane {
    /// Makes a subscription; its record (with the secret, shown this once).
    /// It hears only events recorded after it. An url the outbound policy
    /// refuses (`webhooks.allow-hosts`) is a 400 `address_not_allowed` on
    /// `url`, for the operator too (a tenant is not told what a refused
    /// name resolved to); a tenant at `webhooks.max-per-tenant`
    /// subscriptions gets a 409.
    pub async fn create_webhook(&self, s: Subscription) -> Result<WebhookRecord> {
        let policy = crate::webhook::policy(&self.sh.config);
        let reader = Reader::of_owner(s.owner.as_deref());
        if let Err(why) = check_new(&policy, &SystemResolver, &s.url, reader).await {
            return Err(ActorError::Invalid(SpecError::new(
                SpecErrorKind::NotAllowed,
                "url",
                why.0,
            )));
        }
        if let Some(t) = &s.tenant {
            if self.tenant(t).await?.is_none() {
                return Err(ActorError::not_found("tenant", t));
            }
        }
        // One subscription at a time from the count to the commit: two
        // requests counted together would both see room for one more.
        let _subscribing = self.sh.webhook_subscribing.lock().await;
        if let Some(owner) = &s.owner {
            let cap = self.sh.config.webhooks.max_per_tenant;
            let theirs = self.webhooks().await?;
            let held = theirs
                .iter()
                .filter(|w| w.owner.as_ref() == Some(owner))
                .count();
            if held >= cap {
                return Err(ActorError::Conflict(format!(
                    "tenant {owner:?} has {held} webhook subscriptions, the most one tenant may have (webhooks.max-per-tenant); delete one first"
                )));
            }
        }
        let rec = new_record(&self.store(), s, self.sh.now_ms())?;
        let mut b = self.store().batch();
        b.put_webhook(&rec);
        self.sh
            .gate
            .commit_durable(CommitSite::WebhookSubscribe, b)
            .await
            .map_err(|e| ActorError::not_recorded("the webhook subscription", e))?;
        Ok(rec)
    }

    /// Every subscription, ordered by id.
    pub async fn webhooks(&self) -> Result<Vec<WebhookRecord>> {
        let store = self.store();
        blocking(move || store.webhooks()).await
    }

    /// One subscription.
    pub async fn webhook(&self, id: &str) -> Result<Option<WebhookRecord>> {
        let (store, id) = (self.store(), id.to_string());
        blocking(move || store.webhook(&id)).await
    }

    /// Deletes a subscription with its deliveries: nothing more is sent to it.
    pub async fn delete_webhook(&self, id: &str) -> Result<()> {
        let (store, id) = (self.store(), id.to_string());
        let b = blocking(move || store.forget_webhook(&id)).await?;
        self.sh
            .gate
            .commit_durable(CommitSite::WebhookSubscribe, b)
            .await
            .map_err(|e| ActorError::not_recorded("deleting the webhook subscription", e))
    }

    /// A subscription's deliveries with event ids after `after`, ascending.
    pub async fn webhook_deliveries(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>> {
        let (store, id) = (self.store(), id.to_string());
        blocking(move || store.deliveries(&id, after, limit)).await
    }
}
