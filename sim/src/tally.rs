//! What every replay counts the same way: GPU arrivals and allocations (the
//! paper's figures), placed and failed tasks by reason, and the allocation
//! curve. Shared by the plain replay and the cache replay, so their
//! allocation figures mean exactly the same thing.
use std::collections::BTreeMap;

use caldera_scheduling::placement::{Demand, Placement, Placer, Pool};

/// Running counts of one seed.
#[derive(Debug, Clone)]
pub struct Tally {
    capacity: f64,
    arrived: u64,
    allocated: u64,
    placed: usize,
    at_100: Option<f64>,
    failed: BTreeMap<String, u32>,
    curve: Vec<(f64, f64)>,
}

/// The counts at the end of a seed.
#[derive(Debug, Clone)]
pub struct Totals {
    pub alloc_pct_at_100: f64,
    pub alloc_pct_at_end: f64,
    pub arrived_pct_at_end: f64,
    pub unallocated_gpus_at_end: f64,
    pub placed: usize,
    pub failed_by_reason: BTreeMap<String, u32>,
    pub curve: Vec<(f64, f64)>,
}

impl Tally {
    /// Nothing arrived yet on a cluster of `capacity_milli` milli-GPUs.
    pub fn new(capacity_milli: u64) -> Self {
        Tally {
            capacity: capacity_milli.max(1) as f64,
            arrived: 0,
            allocated: 0,
            placed: 0,
            at_100: None,
            failed: BTreeMap::new(),
            curve: vec![(0.0, 0.0)],
        }
    }

    /// Place one task asking `request` milli-GPUs, commit it, count it, and
    /// sample the curve. `None` (counted by reason) when it found no room.
    pub fn place(
        &mut self,
        placer: &mut Placer,
        pool: &mut Pool,
        demand: &Demand,
        request: u64,
    ) -> Option<Placement> {
        self.arrived += request;
        let out = match placer.place(pool, demand) {
            Ok(p) => match pool.commit(demand, &p) {
                Ok(()) => {
                    self.allocated += request;
                    self.placed += 1;
                    Some(p)
                }
                Err(e) => {
                    self.fail(e.name());
                    None
                }
            },
            Err(rej) => {
                self.fail(rej.counts().first().map(|(r, _)| *r).unwrap_or("no_nodes"));
                None
            }
        };
        self.sample();
        out
    }

    fn fail(&mut self, reason: &str) {
        *self.failed.entry(reason.to_string()).or_insert(0) += 1;
    }

    fn pcts(&self) -> (f64, f64) {
        (
            100.0 * self.arrived as f64 / self.capacity,
            100.0 * self.allocated as f64 / self.capacity,
        )
    }

    fn sample(&mut self) {
        let (arr_pct, alloc_pct) = self.pcts();
        if self.at_100.is_none() && arr_pct >= 100.0 {
            self.at_100 = Some(alloc_pct);
        }
        if self.curve.last().is_some_and(|&(a, _)| arr_pct >= a + 1.0) {
            self.curve.push((arr_pct, alloc_pct));
        }
    }

    /// The figures of the seed.
    pub fn finish(mut self) -> Totals {
        let (arr_pct, alloc_pct) = self.pcts();
        if self.curve.last().is_some_and(|&(a, _)| a < arr_pct) {
            self.curve.push((arr_pct, alloc_pct));
        }
        Totals {
            alloc_pct_at_100: self.at_100.unwrap_or(alloc_pct),
            alloc_pct_at_end: alloc_pct,
            arrived_pct_at_end: arr_pct,
            unallocated_gpus_at_end: (self.capacity - self.allocated as f64) / 1000.0,
            placed: self.placed,
            failed_by_reason: self.failed,
            curve: self.curve,
        }
    }
}
