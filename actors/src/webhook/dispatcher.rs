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
//! 2. Dispatch: each subscription's queue (by due time) is read at its head,
//!    at most [`MAX_IN_FLIGHT_PER_WEBHOOK`] attempts per subscription and
//!    `webhook-max-in-flight` in all, so one slow receiver never holds the
//!    others' deliveries, and memory holds only the attempts in flight.
//! 3. Outcome: each attempt is recorded (delivered, retry at, failed); a
//!    pending delivery stays queued until then, so a crash mid-attempt
//!    means one more attempt, never none.
use super::backoff::{jitter_unit, NextStep, RetryPolicy};
use super::{payload, MAX_IN_FLIGHT_PER_WEBHOOK};
use crate::commit_site::CommitSite;
use crate::shared::Shared;
use actix::prelude::*;
use caldera_spec::webhook::{webhook_type, Attempt, DeliveryRecord, DeliveryState, WebhookRecord};
use caldera_spec::Event;
use caldera_storage::{Due, EventFilter, StorageError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the log and the queues are looked at.
const POLL: Duration = Duration::from_millis(100);
/// Events read per fan-out page, and pages per poll.
const PAGE: usize = 256;
const PAGES_PER_POLL: usize = 16;
/// `m/` key of the stored cursor (the last event fanned out, decimal).
const META_CURSOR: &str = "webhook_cursor";

pub struct Dispatcher {
    sh: Arc<Shared>,
    /// The last event seq fanned out (in memory; sled holds the last one
    /// that produced deliveries).
    cursor: u64,
    in_flight: HashSet<(String, u64)>,
    per_webhook: HashMap<String, usize>,
    client: Option<awc::Client>,
}

/// One attempt's outcome, back from its HTTP future.
struct Outcome {
    webhook_id: String,
    seq: u64,
    was_due: u64,
    attempt: Attempt,
}

impl Dispatcher {
    /// Starts the supervised Dispatcher on an arbiter (thread) of its own:
    /// its sled reads and HTTP never wait behind the Scheduler's cycle.
    pub fn start(sh: Arc<Shared>) -> Addr<Dispatcher> {
        let arbiter = actix::Arbiter::new();
        actix::Supervisor::start_in_arbiter(&arbiter.handle(), move |_| Dispatcher {
            sh,
            cursor: 0,
            in_flight: HashSet::new(),
            per_webhook: HashMap::new(),
            client: None,
        })
    }

    fn policy(&self) -> RetryPolicy {
        let c = &self.sh.config;
        RetryPolicy {
            initial_ms: c.webhook_retry_initial_ms,
            max_ms: c.webhook_retry_max_ms,
            retry_for_ms: c.webhook_retry_for_ms,
        }
    }

    /// Reads the stored cursor; what was in flight is forgotten (it is
    /// still queued, and is attempted again).
    fn load(&mut self) -> Result<(), StorageError> {
        let store = self.sh.gate.store();
        let stored = match store.meta_get(META_CURSOR)? {
            Some(v) => String::from_utf8_lossy(&v).parse().ok(),
            None => None,
        };
        self.cursor = start_cursor(stored, &store.webhooks()?, store.last_event_seq());
        self.in_flight.clear();
        self.per_webhook.clear();
        Ok(())
    }

    fn fail(&self, ctx: &mut Context<Self>, what: &str, e: StorageError) {
        tracing::error!(error = %e, "webhook dispatcher: {what} failed; rebuilding from storage");
        ctx.stop();
    }

    /// One poll: fan out, then (once that is durable) dispatch.
    fn poll(&mut self, ctx: &mut Context<Self>) {
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
        let store = self.sh.gate.store();
        // Read before the subscriptions: one made after this read hears only
        // events after its own creation, which are after `newest` too.
        let newest = store.last_event_seq();
        let subs = store.webhooks()?;
        if subs.is_empty() {
            self.cursor = self.cursor.max(newest);
            return Ok(None);
        }
        let now = self.sh.now_ms();
        let mut b = store.batch();
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
                    b.put_delivery(&DeliveryRecord::new(&s.id, e.seq, kind, now), None);
                    deliveries += 1;
                }
            }
            if events.len() < PAGE {
                break;
            }
        }
        if deliveries == 0 {
            return Ok(None);
        }
        b.meta_put(META_CURSOR, self.cursor.to_string().as_bytes());
        self.sh.gate.commit(CommitSite::WebhookFanOut, b).map(Some)
    }

    /// Starts attempts for what is due, subscription by subscription.
    fn dispatch(&mut self, ctx: &mut Context<Self>) {
        let store = self.sh.gate.store().clone();
        let subs = match store.webhooks() {
            Ok(s) => s,
            Err(e) => return self.fail(ctx, "reading subscriptions", e),
        };
        let now = self.sh.now_ms();
        let budget = self.sh.config.webhook_max_in_flight;
        for s in subs {
            if self.in_flight.len() >= budget {
                break;
            }
            let busy = self.per_webhook.get(&s.id).copied().unwrap_or(0);
            let room = MAX_IN_FLIGHT_PER_WEBHOOK.saturating_sub(busy);
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
                .take(room.min(budget - self.in_flight.len()));
            for d in fresh.collect::<Vec<_>>() {
                if let Err(e) = self.attempt(ctx, &s, d) {
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
        let store = self.sh.gate.store();
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
            return Ok(());
        };
        if record.state != DeliveryState::Pending {
            let mut b = store.batch();
            b.unqueue_delivery(&s.id, d);
            self.sh.gate.commit(CommitSite::WebhookAttempt, b)?;
            return Ok(());
        }
        self.in_flight.insert((s.id.clone(), d.seq));
        *self.per_webhook.entry(s.id.clone()).or_default() += 1;
        let client = self
            .client
            .get_or_insert_with(|| {
                client(
                    self.sh.config.webhook_timeout_ms,
                    self.sh.config.webhook_ca_file.as_deref(),
                )
            })
            .clone();
        let at_ms = self.sh.now_ms();
        let send = post(client, s.clone(), event, record.event_type);
        let (webhook_id, seq, was_due) = (s.id.clone(), d.seq, d.due_ms);
        ctx.spawn(
            send.into_actor(self)
                .map(move |(status, error, took), act, ctx| {
                    let attempt = Attempt {
                        at_ms,
                        status,
                        error,
                        duration_ms: took,
                    };
                    act.record(
                        ctx,
                        Outcome {
                            webhook_id,
                            seq,
                            was_due,
                            attempt,
                        },
                    );
                }),
        );
        Ok(())
    }

    /// Records an attempt's outcome and refills the freed slot.
    fn record(&mut self, ctx: &mut Context<Self>, o: Outcome) {
        self.in_flight.remove(&(o.webhook_id.clone(), o.seq));
        if let Some(n) = self.per_webhook.get_mut(&o.webhook_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_webhook.remove(&o.webhook_id);
            }
        }
        if let Err(e) = self.record_outcome(o) {
            return self.fail(ctx, "recording an attempt", e);
        }
        self.dispatch(ctx);
    }

    fn record_outcome(&mut self, o: Outcome) -> Result<(), StorageError> {
        let store = self.sh.gate.store();
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

/// The HTTP client of the deliveries: the attempt timeout, no redirects
/// followed (a 3xx is not a 2xx: it is retried, and shown), TLS for
/// `https://` urls trusting the host's store and `webhook-ca-file`.
fn client(timeout_ms: u64, ca_file: Option<&std::path::Path>) -> awc::Client {
    let builder = awc::Client::builder()
        .timeout(Duration::from_millis(timeout_ms))
        .disable_redirects();
    // The config was checked at start (`config_problem`); should the file
    // have gone bad since, the host's store alone still serves public urls.
    let tls = caldera_tls::client_config(ca_file, "webhook-ca-file").or_else(|e| {
        tracing::warn!("webhook TLS: {e}; trusting the host's certificate store only");
        caldera_tls::client_config(None, "webhook-ca-file")
    });
    match tls {
        Ok(tls) => builder
            .connector(awc::Connector::new().rustls_0_23(tls))
            .finish(),
        Err(e) => {
            tracing::warn!("webhook TLS: {e}; https urls will fail");
            builder.finish()
        }
    }
}

/// POSTs one delivery: `(status, error, ms taken)`.
async fn post(
    client: awc::Client,
    s: WebhookRecord,
    e: Event,
    kind: String,
) -> (Option<u16>, Option<String>, u64) {
    let body = payload::body(&e, &kind);
    let t = crate::clock::now_ms() / 1000;
    let mut req = client.post(&s.url);
    for (name, value) in payload::headers(&s.id, &e, &s.secret, t, &body) {
        req = req.insert_header((name, value));
    }
    let started = Instant::now();
    let result = req.send_body(body).await;
    let took = started.elapsed().as_millis() as u64;
    match result {
        Ok(resp) => (Some(resp.status().as_u16()), None, took),
        Err(err) => (None, Some(err.to_string()), took),
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
