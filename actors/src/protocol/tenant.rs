//! Messages a TenantActor answers, and [`TenantHandle`].
use super::handle::handle;
use super::lifecycle::{Observe, Rebuild};
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::{Quota, TenantRecord};

/// The tenant record (token hash included; views strip it).
#[derive(Message)]
#[rtype(result = "TenantRecord")]
pub struct TenantSnapshot;

/// An operator changes the quota. Running work is never killed by a lower
/// quota: it keeps running; new work waits until usage is back under it.
#[derive(Message)]
#[rtype(result = "Result<TenantRecord>")]
pub struct ChangeQuota {
    /// New guarantee; `None` keeps the current one.
    pub quota: Option<Quota>,
    /// New borrowing limit; `None` keeps the current one.
    pub borrowing_limit: Option<Quota>,
}

handle! {
    /// A tenant's actor, as the directory holds it.
    TenantHandle: TenantPort {
        tell {
            rebuild: Rebuild,
        }
        ask {
            observe: Observe,
            snapshot: TenantSnapshot,
            change_quota: ChangeQuota,
        }
    }
}
