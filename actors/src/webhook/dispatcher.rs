//! The Dispatcher: follows the event log from a cursor, records one
//! delivery per (subscription, event) that wants it, and POSTs them.
//!
//! Order of things, each the reason for the next:
//! 1. Fan-out: new events are read after the cursor; their deliveries and the
//!    new cursor are committed in ONE batch and flushed before any of them
//!    is attempted. A restart resumes at the stored cursor: an event with
//!    deliveries is never fanned out twice, and none is skipped. (Events
//!    that no subscription wants move the cursor in memory only: re-reading
//!    them after a restart finds nobody wanting them again, since a
//!    subscription only hears events newer than itself.)
//!    A tenant with `webhooks.max-pending-per-tenant` deliveries pending
//!    gets the next one recorded `failed`, unsent; finished deliveries past
//!    the retention bounds are deleted in the same batch (`retention.rs`).
//! 2. Dispatch: each subscription's queue (by due time) is read at its head,
//!    at most [`MAX_IN_FLIGHT_PER_WEBHOOK`] attempts per subscription,
//!    `webhooks.max-in-flight-per-tenant` per tenant and
//!    `webhooks.max-in-flight` in all (`slots.rs`), starting at another
//!    subscription each time, so one slow receiver, or one tenant's many,
//!    never holds the others' deliveries, and memory holds only the
//!    attempts in flight.
//! 3. Outcome: each attempt is recorded (delivered, retry at, failed); a
//!    pending delivery stays queued until then, so a crash mid-attempt
//!    means one more attempt, never none.
use super::backoff::{jitter_unit, NextStep, RetryPolicy};
use super::retention::{self, Bounds, Counts};
use super::send::{self, Route};
use super::slots::{holder, Limits, Slots};
use super::target::SystemResolver;
use super::MAX_IN_FLIGHT_PER_WEBHOOK;
use crate::commit_site::CommitSite;
use crate::shared::Shared;
use actix::prelude::*;
use caldera_spec::webhook::{webhook_type, Attempt, DeliveryRecord, DeliveryState, WebhookRecord};
use caldera_storage::{Due, EventFilter, StorageError, Store, WriteBatch};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How often the log and the queues are looked at.
const POLL: Duration = Duration::from_millis(100);
/// Events read per fan-out page, and pages per poll.
const PAGE: usize = 256;
const PAGES_PER_POLL: usize = 16;
/// `m/` key of the stored cursor (the last event fanned out, decimal).
const META_CURSOR: &str = "webhook_cursor";
/// Polls between two passes of the age bound over every subscription.
const AGE_PASS_EVERY: u64 = 50;
/// Why a delivery past its tenant's queue limit was not sent.
const QUEUE_FULL: &str =
    "not sent: this tenant already had webhooks.max-pending-per-tenant deliveries waiting";

pub struct Dispatcher {
    sh: Arc<Shared>,
    /// The last event seq fanned out (in memory; sled holds the last one
    /// that produced deliveries).
    cursor: u64,
    in_flight: HashSet<(String, u64)>,
    slots: Slots,
    /// Each subscription's deliveries on record and pending (loaded from
    /// sled the first time it is seen, then kept in step).
    counts: HashMap<String, Counts>,
    /// Subscriptions that got deliveries in the last fan-out: pruned at the
    /// next, which reads them back from sled.
    grew: HashSet<String>,
    /// Where dispatch starts in the list of subscriptions; moves each time.
    rotation: usize,
    polls: u64,
    route: Route,
    client: Option<awc::Client>,
}

/// One attempt's outcome, back from its HTTP future.
struct Outcome {
    webhook_id: String,
    holder: String,
    seq: u64,
    was_due: u64,
    attempt: Attempt,
}

impl Dispatcher {
    /// Starts the supervised Dispatcher on an arbiter (thread) of its own:
    /// its sled reads and HTTP never wait behind the Scheduler's cycle.
    pub fn start(sh: Arc<Shared>) -> Addr<Dispatcher> {
        let arbiter = actix::Arbiter::new();
        let c = &sh.config;
        let limits = Limits {
            total: c.webhooks.max_in_flight,
            per_holder: c.webhooks.max_in_flight_per_tenant,
            per_webhook: MAX_IN_FLIGHT_PER_WEBHOOK,
        };
        let route = Route {
            policy: Arc::new(super::policy(c)),
            resolver: Arc::new(SystemResolver),
        };
        actix::Supervisor::start_in_arbiter(&arbiter.handle(), move |_| Dispatcher {
            sh,
            cursor: 0,
            in_flight: HashSet::new(),
            slots: Slots::new(limits),
            counts: HashMap::new(),
            grew: HashSet::new(),
            rotation: 0,
            polls: 0,
            route,
            client: None,
        })
    }

    fn bounds(&self) -> Bounds {
        Bounds {
            kept: self.sh.config.webhooks.deliveries_kept,
            max_age_ms: self.sh.config.webhooks.delivery_retention_ms,
        }
    }

    /// Subscription `id`'s counts, read from sled the first time.
    fn counts_of(&mut self, store: &Store, id: &str) -> Result<&mut Counts, StorageError> {
        if !self.counts.contains_key(id) {
            let c = Counts::load(store, id)?;
            self.counts.insert(id.to_string(), c);
        }
        Ok(self.counts.entry(id.to_string()).or_default())
    }

    /// One delivery of subscription `id` is no longer pending.
    fn finished_one(&mut self, id: &str) {
        if let Some(c) = self.counts.get_mut(id) {
            c.pending = c.pending.saturating_sub(1);
        }
    }

    fn policy(&self) -> RetryPolicy {
        let c = &self.sh.config;
        RetryPolicy {
            initial_ms: c.webhooks.retry_initial_ms,
            max_ms: c.webhooks.retry_max_ms,
            retry_for_ms: c.webhooks.retry_for_ms,
        }
    }

    /// Reads the stored cursor; what was in flight is forgotten (it is
    /// still queued, and is attempted again).
    fn load(&mut self) -> Result<(), StorageError> {
        let store = self.sh.gate.store().clone();
        let stored = match store.meta_get(META_CURSOR)? {
            Some(v) => String::from_utf8_lossy(&v).parse().ok(),
            None => None,
        };
        self.cursor = start_cursor(stored, &store.webhooks()?, store.last_event_seq());
        self.in_flight.clear();
        self.slots.clear();
        self.counts.clear();
        self.grew.clear();
        Ok(())
    }

    fn fail(&self, ctx: &mut Context<Self>, what: &str, e: StorageError) {
        tracing::error!(error = %e, "webhook dispatcher: {what} failed; rebuilding from storage");
        ctx.stop();
    }

    /// One poll: fan out, then (once that is durable) dispatch; now and
    /// then, the age bound over every subscription.
    fn poll(&mut self, ctx: &mut Context<Self>) {
        self.polls += 1;
        if self.polls.is_multiple_of(AGE_PASS_EVERY) {
            if let Err(e) = self.age_pass() {
                return self.fail(ctx, "pruning old deliveries", e);
            }
        }
        match self.fan_out() {
            Err(e) => self.fail(ctx, "fan-out", e),
            Ok(Some(ticket)) => {
                let gate = self.sh.gate.clone();
                // Nothing else runs until the deliveries are on disk.
                ctx.wait(
                    async move { gate.durable(ticket).await }
                        .into_actor(self)
                        .map(|_, act, ctx| act.dispatch(ctx)),
                );
            }
            Ok(None) => self.dispatch(ctx),
        }
    }

    /// Records the deliveries of the events after the cursor; the ticket of
    /// the batch when there were any.
    fn fan_out(&mut self) -> Result<Option<crate::durability::Ticket>, StorageError> {
        let store = self.sh.gate.store().clone();
        // Read before the subscriptions: one made after this read hears only
        // events after its own creation, which are after `newest` too.
        let newest = store.last_event_seq();
        let subs = store.webhooks()?;
        if subs.is_empty() {
            self.cursor = self.cursor.max(newest);
            return Ok(None);
        }
        let now = self.sh.now_ms();
        let known: HashSet<&str> = subs.iter().map(|s| s.id.as_str()).collect();
        self.counts.retain(|id, _| known.contains(id.as_str()));
        let mut pending_of: HashMap<String, usize> = HashMap::new();
        for s in &subs {
            let pending = self.counts_of(&store, &s.id)?.pending;
            *pending_of.entry(holder(s).to_string()).or_default() += pending;
        }
        let max_pending = self.sh.config.webhooks.max_pending_per_tenant;
        let mut b = store.batch();
        for id in std::mem::take(&mut self.grew) {
            if known.contains(id.as_str()) {
                self.prune(&store, &mut b, &id, now)?;
            }
        }
        let mut deliveries = 0usize;
        for _ in 0..PAGES_PER_POLL {
            if self.cursor >= newest {
                break;
            }
            let events = store.events(&EventFilter::default(), self.cursor, PAGE)?;
            // Past `newest` may be events a subscription made after the
            // read above wants: the next poll reads them, with it.
            for e in events.iter().take_while(|e| e.seq <= newest) {
                self.cursor = e.seq;
                let Some(kind) = webhook_type(e) else {
                    continue;
                };
                for s in subs.iter().filter(|s| s.wants(e, kind)) {
                    let queued = pending_of.entry(holder(s).to_string()).or_default();
                    let counts = self.counts.entry(s.id.clone()).or_default();
                    counts.records += 1;
                    if *queued >= max_pending {
                        let d = DeliveryRecord::unsent(&s.id, e.seq, kind, now, QUEUE_FULL);
                        b.put_delivery(&d, None);
                    } else {
                        *queued += 1;
                        counts.pending += 1;
                        b.put_delivery(&DeliveryRecord::new(&s.id, e.seq, kind, now), None);
                    }
                    self.grew.insert(s.id.clone());
                    deliveries += 1;
                }
            }
            if events.len() < PAGE {
                break;
            }
        }
        if deliveries == 0 {
            if !b.is_empty() {
                // Only deletions: nothing waits for them.
                self.sh.gate.commit(CommitSite::WebhookFanOut, b)?;
            }
            return Ok(None);
        }
        b.meta_put(META_CURSOR, self.cursor.to_string().as_bytes());
        self.sh.gate.commit(CommitSite::WebhookFanOut, b).map(Some)
    }

    /// Adds to `b` what brings subscription `id` within the retention
    /// bounds.
    fn prune(
        &mut self,
        store: &Store,
        b: &mut WriteBatch,
        id: &str,
        now: u64,
    ) -> Result<(), StorageError> {
        let bounds = self.bounds();
        let counts = self.counts_of(store, id)?;
        retention::prune(store, b, id, counts, bounds, now)?;
        Ok(())
    }

    /// The age bound over every subscription (deliveries grow old without
    /// new ones coming).
    fn age_pass(&mut self) -> Result<(), StorageError> {
        let store = self.sh.gate.store().clone();
        let now = self.sh.now_ms();
        let mut b = store.batch();
        for s in store.webhooks()? {
            self.prune(&store, &mut b, &s.id, now)?;
        }
        if !b.is_empty() {
            self.sh.gate.commit(CommitSite::WebhookFanOut, b)?;
        }
        Ok(())
    }

    /// Starts attempts for what is due, subscription by subscription.
    fn dispatch(&mut self, ctx: &mut Context<Self>) {
        let store = self.sh.gate.store().clone();
        let subs = match store.webhooks() {
            Ok(s) => s,
            Err(e) => return self.fail(ctx, "reading subscriptions", e),
        };
        let now = self.sh.now_ms();
        // Start at another subscription each time: under the total limit,
        // no subscription is always last.
        let n = subs.len().max(1);
        self.rotation = (self.rotation + 1) % n;
        let order = subs.iter().cycle().skip(self.rotation).take(subs.len());
        for s in order {
            if self.slots.full() {
                break;
            }
            let busy = self.slots.busy(&s.id);
            let room = self.slots.room(&s.id, holder(s));
            if room == 0 {
                continue;
            }
            // In-flight ones are still queued: read past them.
            let due = match store.due_deliveries(&s.id, now, busy + room) {
                Ok(d) => d,
                Err(e) => return self.fail(ctx, "reading the delivery queue", e),
            };
            let fresh = due
                .into_iter()
                .filter(|d| !self.in_flight.contains(&(s.id.clone(), d.seq)))
                .take(room);
            for d in fresh.collect::<Vec<_>>() {
                if let Err(e) = self.attempt(ctx, s, d) {
                    return self.fail(ctx, "starting an attempt", e);
                }
            }
        }
    }

    /// Sends one delivery (its record and event read back from sled).
    fn attempt(
        &mut self,
        ctx: &mut Context<Self>,
        s: &WebhookRecord,
        d: Due,
    ) -> Result<(), StorageError> {
        let store = self.sh.gate.store().clone();
        let event = store
            .events(&EventFilter::default(), d.seq.saturating_sub(1), 1)?
            .into_iter()
            .find(|e| e.seq == d.seq);
        let record = store.delivery(&s.id, d.seq)?;
        let (Some(event), Some(record)) = (event, record) else {
            // A queue entry without its delivery or event: drop it.
            let mut b = store.batch();
            b.unqueue_delivery(&s.id, d);
            self.sh.gate.commit(CommitSite::WebhookAttempt, b)?;
            self.finished_one(&s.id);
            return Ok(());
        };
        if record.state != DeliveryState::Pending {
            let mut b = store.batch();
            b.unqueue_delivery(&s.id, d);
            self.sh.gate.commit(CommitSite::WebhookAttempt, b)?;
            self.finished_one(&s.id);
            return Ok(());
        }
        self.in_flight.insert((s.id.clone(), d.seq));
        let who = holder(s).to_string();
        self.slots.take(&s.id, &who);
        let c = &self.sh.config;
        let client = self
            .client
            .get_or_insert_with(|| {
                send::client(
                    c.webhooks.timeout_ms,
                    c.webhooks.ca_file.as_deref(),
                    c.webhooks.max_in_flight,
                )
            })
            .clone();
        let at_ms = self.sh.now_ms();
        let attempt = send::post(
            client,
            self.route.clone(),
            s.clone(),
            event,
            record.event_type,
        );
        let (webhook_id, seq, was_due) = (s.id.clone(), d.seq, d.due_ms);
        ctx.spawn(attempt.into_actor(self).map(move |answer, act, ctx| {
            let attempt = Attempt {
                at_ms,
                status: answer.status,
                error: answer.error,
                duration_ms: answer.took_ms,
            };
            act.record(
                ctx,
                Outcome {
                    webhook_id,
                    holder: who,
                    seq,
                    was_due,
                    attempt,
                },
            );
        }));
        Ok(())
    }

    /// Records an attempt's outcome and refills the freed slot.
    fn record(&mut self, ctx: &mut Context<Self>, o: Outcome) {
        self.in_flight.remove(&(o.webhook_id.clone(), o.seq));
        self.slots.give_back(&o.webhook_id, &o.holder);
        if let Err(e) = self.record_outcome(o) {
            return self.fail(ctx, "recording an attempt", e);
        }
        self.dispatch(ctx);
    }

    fn record_outcome(&mut self, o: Outcome) -> Result<(), StorageError> {
        let store = self.sh.gate.store().clone();
        // Deleted meanwhile: nothing to record.
        if store.webhook(&o.webhook_id)?.is_none() {
            return Ok(());
        }
        let Some(mut d) = store.delivery(&o.webhook_id, o.seq)? else {
            return Ok(());
        };
        let now = self.sh.now_ms();
        let ok = o.attempt.status.is_some_and(|s| (200..300).contains(&s));
        d.push_attempt(o.attempt);
        if ok {
            d.state = DeliveryState::Delivered;
            d.next_attempt_ms = None;
        } else {
            let first = d.first_attempt_ms.unwrap_or(now);
            match self
                .policy()
                .after_failure(d.attempt_count, first, now, jitter_unit())
            {
                NextStep::RetryAt(at) => d.next_attempt_ms = Some(at),
                NextStep::GiveUp => {
                    d.state = DeliveryState::Failed;
                    d.next_attempt_ms = None;
                }
            }
        }
        if d.finished() {
            self.finished_one(&o.webhook_id);
        }
        let mut b = store.batch();
        b.put_delivery(&d, Some(o.was_due));
        // Not waited for: an outcome lost in a crash means one more attempt.
        self.sh.gate.commit(CommitSite::WebhookAttempt, b)?;
        Ok(())
    }
}

/// Where fan-out resumes at start: the stored cursor; without one (no
/// event has had a delivery yet), just before the oldest subscription's
/// first event — an event recorded before a crash that no poll had read
/// yet is still owed to it; with no subscription, nothing before `newest` is
/// owed to anyone.
fn start_cursor(stored: Option<u64>, subs: &[WebhookRecord], newest: u64) -> u64 {
    match stored {
        Some(c) => c,
        None => subs.iter().map(|s| s.after_seq).min().unwrap_or(newest),
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Err(e) = self.load() {
            return self.fail(ctx, "reading its cursor", e);
        }
        ctx.run_interval(POLL, |d, ctx| d.poll(ctx));
    }
}

impl actix::Supervised for Dispatcher {
    fn restarting(&mut self, _: &mut Context<Self>) {
        tracing::warn!("webhook dispatcher restarting: resuming from its stored cursor");
        self.client = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(after_seq: u64) -> WebhookRecord {
        WebhookRecord {
            id: format!("wh-{after_seq}"),
            url: "http://127.0.0.1:1/".into(),
            events: vec!["*".into()],
            tenant: None,
            owner: None,
            secret: "k".into(),
            created_ms: 0,
            after_seq,
            from_config: false,
        }
    }

    #[test]
    fn fan_out_resumes_at_the_stored_cursor_else_at_the_oldest_subscription() {
        // Stored: exactly there, whatever else is true.
        assert_eq!(start_cursor(Some(40), &[sub(10)], 90), 40);
        // Subscriptions made at seq 30 and 12, nothing delivered yet, a
        // crash before the first poll: events 13.. are still read.
        assert_eq!(start_cursor(None, &[sub(30), sub(12)], 90), 12);
        // Nobody subscribed: nothing is owed.
        assert_eq!(start_cursor(None, &[], 90), 90);
    }
}
