//! The chargeback figures of `docs/benchmarks/chargeback.md`, measured on real sled files:
//! 1. the size on disk of a year of usage history for 20 tenants and the
//!    pool, in the steady state the tiers keep (1 day of 10 s samples, 30
//!    days of 5 min points, 365 days of 1 h points per series);
//! 2. the time of one month's cost report over 10,000 billing records
//!    (read from sled, priced, grouped by task and by day), median of 20.
//!
//! `cargo run --release -p caldera-actors --example chargeback_figures`
use caldera_actors::chargeback::{report, GpuPrices, GroupBy, Micros, PriceTable};
use caldera_actors::usage_history::{pool_values, PoolSample, TenantSample, TIERS};
use caldera_spec::{BilledGpu, BillingRecord, Usage};
use caldera_storage::{HistoryPoint, HistorySeries, Store, StoreConfig};
use std::time::Instant;

const DAY: u64 = 86_400_000;
const TENANTS: usize = 20;

fn point(at_ms: u64, values: Vec<f32>) -> HistoryPoint {
    HistoryPoint {
        at_ms,
        count: 30,
        max: values.clone(),
        mean: values,
    }
}

fn history_size() -> Result<(u64, u64), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), &StoreConfig::default())?;
    let now = 400 * DAY;
    let tenant = TenantSample {
        allocated: Usage {
            gpus: 3.5,
            gpu_memory_gb: 140.0,
            cpu_cores: 32.0,
            memory_gb: 256.0,
            disk_gb: 200.0,
        },
        used: Usage {
            gpus: 1.2,
            ..Default::default()
        },
    };
    let pool = PoolSample {
        capacity: tenant.allocated,
        allocated: tenant.allocated,
        ..Default::default()
    };
    let mut series: Vec<(HistorySeries, Vec<f32>)> = (0..TENANTS)
        .map(|i| {
            (
                HistorySeries::Tenant(format!("team-{i:02}")),
                tenant.to_values(),
            )
        })
        .collect();
    series.push((HistorySeries::Pool, pool_values(&pool)));
    let mut points = 0u64;
    for (s, values) in &series {
        for (tier, step) in TIERS.iter().zip([10_000u64, 300_000, 3_600_000]) {
            let mut b = store.batch();
            let mut at = now - tier.keep_ms;
            while at < now {
                b.put_history(tier.id, s, &point(at, values.clone()));
                at += step;
                points += 1;
            }
            store.commit(b)?;
        }
    }
    store.flush()?;
    drop(store);
    // Reopened: what a restarted control plane finds.
    let store = Store::open(dir.path(), &StoreConfig::default())?;
    Ok((points, store.size_on_disk()?))
}

fn record(i: usize, month_start: u64) -> BillingRecord {
    let start = month_start + (i as u64 * 263_000) % (29 * DAY);
    BillingRecord {
        allocation_id: format!("team-00/task-{i}.1"),
        tenant: "team-00".into(),
        task_id: format!("team-00/task-{}", i % 500),
        service: None,
        model: i.is_multiple_of(3).then(|| format!("llama:{}", i % 4)),
        node: format!("node-{}", i % 40),
        gpus: vec![BilledGpu {
            model: "A100-80GB".into(),
            index: (i % 8) as u32,
            memory_mb: 20_480,
            memory_total_mb: 81_920,
        }],
        cpu_milli: 8000,
        memory_mb: 65_536,
        disk_mb: 102_400,
        start_ms: start,
        end_ms: Some(start + 3_600_000 + (i as u64 % 7) * 600_000),
        end_reason: Some("released".into()),
        borrowed: i.is_multiple_of(5),
        marks: vec![],
        idle_ms: (i as u64 % 11) * 60_000,
        model_marks: vec![],
    }
}

fn report_time() -> Result<(usize, f64, f64, f64), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), &StoreConfig::default())?;
    let month = 30 * DAY;
    let mut b = store.batch();
    for i in 0..10_000 {
        b.close_billing(&record(i, month));
    }
    store.commit(b)?;
    store.flush()?;
    let prices = PriceTable {
        gpu_hour: GpuPrices([("default".to_string(), Micros(2_400_000))].into()),
        cpu_core_hour: Micros(36_000),
        memory_gb_hour: Micros(10_000),
        disk_gb_hour: Micros(100),
        currency: "EUR".into(),
    };
    let median = |mut t: Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let mut read = Vec::new();
    let mut records = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        records = store.billing_between("team-00", month, 2 * month)?;
        read.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let mut priced = Vec::new();
    for by in [GroupBy::Task, GroupBy::Day] {
        let mut t = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let rep = report(&records, &prices, month, 2 * month, 2 * month, by);
            t.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(rep.total.allocated.0 > 0);
        }
        priced.push(median(t));
    }
    Ok((records.len(), median(read), priced[0], priced[1]))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (points, bytes) = history_size()?;
    println!(
        "history: {TENANTS} tenants + the pool, {points} points: {:.1} MB on disk ({} bytes a point with keys and sled's overhead; raw tenant point {} B + key)",
        bytes as f64 / 1e6,
        bytes / points.max(1),
        HistoryPoint::encoded_len(10)
    );
    let (n, read_ms, task_ms, day_ms) = report_time()?;
    println!(
        "cost report over {n} billing records of a month: reading them from sled {read_ms:.1} ms; pricing and grouping by task {task_ms:.1} ms, by day {day_ms:.1} ms (medians of 20)"
    );
    Ok(())
}
