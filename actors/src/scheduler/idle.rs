//! The idle inspector: compares each allocation with its measured use. An
//! allocation idle for a whole window gets an `idle_warning` event and a
//! webhook POST to its tenant; still idle after the grace period, it is
//! reclaimed (training: checkpoint and stop; inference: scale in) unless its
//! task is exempt. It also samples allocated-vs-used per tenant over time — the
//! report that ends quota hoarding.
use super::Scheduler;
use crate::clock::now_ms;
use crate::config::ServerConfig;
use crate::protocol::scheduler::TenantUsage;
use crate::protocol::task::Reclaim;
use crate::views::UsageSample;
use actix::prelude::*;
use caldera_scheduling::queue::ledger::allocation_usage;
use caldera_spec::{Event, EventKind, Usage};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Samples kept per tenant (24 h at the default 10 s period).
const HISTORY: usize = 8640;

#[derive(Debug, Clone, Default)]
struct Watch {
    idle_since: Option<u64>,
    warned_at: Option<u64>,
    reclaimed: bool,
}

pub struct Inspector {
    threshold_pct: f32,
    window_ms: u64,
    grace_ms: u64,
    sample_ms: u64,
    webhook: Option<String>,
    watches: HashMap<String, Watch>,
    history: HashMap<String, VecDeque<UsageSample>>,
}

impl Inspector {
    pub fn new(c: &ServerConfig) -> Inspector {
        Inspector {
            threshold_pct: c.idle_threshold_pct,
            window_ms: c.idle_window_ms,
            grace_ms: c.idle_grace_ms,
            sample_ms: c.usage_sample_ms,
            webhook: c.idle_webhook_url.clone(),
            watches: HashMap::new(),
            history: HashMap::new(),
        }
    }

    pub fn sample_every(&self) -> Duration {
        Duration::from_millis(self.sample_ms.max(100))
    }

    pub fn forget(&mut self, allocation_id: &str) {
        self.watches.remove(allocation_id);
    }

    pub fn history(&self, tenant: &str) -> Vec<UsageSample> {
        self.history
            .get(tenant)
            .map(|h| h.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl Handler<TenantUsage> for Scheduler {
    type Result = MessageResult<TenantUsage>;
    fn handle(&mut self, m: TenantUsage, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.idle.history(&m.tenant))
    }
}

impl Scheduler {
    pub(crate) fn inspect_idle(&mut self) {
        let now = now_ms();
        let mut allocated: HashMap<String, Usage> = HashMap::new();
        let mut used: HashMap<String, Usage> = HashMap::new();
        let mut warn = Vec::new();
        let mut reclaim = Vec::new();
        for e in self.core.ledger().all() {
            let a = &e.allocation;
            let u = allocation_usage(e);
            *allocated.entry(a.tenant.clone()).or_default() += u;
            let Some(m) = self.usage.get(&a.allocation_id) else {
                continue;
            };
            let measured = if a.gpus.is_empty() {
                m.cpu_pct
            } else {
                m.gpu_utilization_pct
            };
            *used.entry(a.tenant.clone()).or_default() += Usage {
                gpus: u.gpus * (m.gpu_utilization_pct as f64 / 100.0).min(1.0),
                gpu_memory_gb: m.gpu_memory_used_mb as f64 / 1024.0,
                cpu_cores: m.cpu_pct as f64 / 100.0,
                memory_gb: m.memory_mb as f64 / 1024.0,
                disk_gb: 0.0,
            };
            if self.idle.window_ms == 0 || e.idle_exempt {
                continue;
            }
            let w = self
                .idle
                .watches
                .entry(a.allocation_id.clone())
                .or_default();
            if measured >= self.idle.threshold_pct {
                *w = Watch::default();
                continue;
            }
            let since = *w.idle_since.get_or_insert(now);
            if w.warned_at.is_none() && now - since >= self.idle.window_ms {
                w.warned_at = Some(now);
                warn.push((a.clone(), now - since, m.gpu_source.clone()));
            } else if let Some(warned) = w.warned_at {
                if !w.reclaimed && now - warned >= self.idle.grace_ms {
                    w.reclaimed = true;
                    reclaim.push((a.clone(), now - since));
                }
            }
        }
        for (a, idle_for, source) in warn {
            let msg = format!(
                "allocation {} of task {} idle for {}s (measured {} below {}%); reclaimed in {}s unless it gets busy",
                a.allocation_id,
                a.task_id,
                idle_for / 1000,
                source,
                self.idle.threshold_pct,
                self.idle.grace_ms / 1000
            );
            self.gate.record(
                Event::new(now, EventKind::IdleWarning, msg.clone())
                    .task(&a.task_id)
                    .tenant(&a.tenant)
                    .node(&a.node),
            );
            if let Some(url) = self.idle.webhook.clone() {
                let body = serde_json::json!({"event": "idle_warning", "tenant": a.tenant, "task": a.task_id,
                    "allocation": a.allocation_id, "node": a.node, "idle_for_s": idle_for / 1000, "message": msg});
                actix::spawn(async move {
                    let client = awc::Client::default();
                    if let Err(e) = client
                        .post(&url)
                        .timeout(Duration::from_secs(5))
                        .send_json(&body)
                        .await
                    {
                        tracing::warn!(%url, error = %e, "idle webhook failed");
                    }
                });
            }
        }
        for (a, idle_for) in reclaim {
            if let Some(t) = self.registry.task(&a.task_id) {
                t.do_send(Reclaim {
                    allocation_id: a.allocation_id.clone(),
                    reason: format!("reclaimed: idle for {}s", idle_for / 1000),
                });
            }
        }
        for (tenant, alloc) in allocated {
            let h = self.idle.history.entry(tenant.clone()).or_default();
            h.push_back(UsageSample {
                at_ms: now,
                allocated: alloc,
                used: used.remove(&tenant).unwrap_or_default(),
            });
            if h.len() > HISTORY {
                h.pop_front();
            }
        }
    }
}
