//! After storage was reopened (see [`crate::storage_health`]), what was applied
//! but never flushed is gone: every actor reads its state back from storage,
//! as after a failed commit.
use crate::shared::Shared;
use std::sync::Arc;

/// Every actor reads its state back from storage after a reopen (what it
/// applied but never flushed is gone): run once at boot.
pub fn rebuild_after_reopen(sh: Arc<Shared>) {
    let mut reopened = sh.gate.reopened();
    actix::spawn(async move {
        while reopened.changed().await.is_ok() {
            let why = "storage was reopened after an I/O failure".to_string();
            sh.scheduler.do_send(crate::protocol::scheduler::Restart);
            for (_, t) in sh.registry.tasks() {
                t.do_send(crate::protocol::lifecycle::Rebuild { why: why.clone() });
            }
            for (_, s) in sh.registry.services() {
                s.do_send(crate::protocol::lifecycle::Rebuild { why: why.clone() });
            }
            for (_, n) in sh.registry.nodes() {
                n.do_send(crate::protocol::lifecycle::Rebuild { why: why.clone() });
            }
            for (_, t) in sh.registry.tenants() {
                t.do_send(crate::protocol::lifecycle::Rebuild { why: why.clone() });
            }
            for (_, m) in sh.registry.models() {
                m.do_send(crate::protocol::lifecycle::Rebuild { why: why.clone() });
            }
        }
    });
}
