//! Node loss detection: kill -9 a real agent and time until the control plane
//! records `node_lost`, from the event's own `at_ms` (server clock, same
//! machine as ours). The kill lands at a random phase of the heartbeat cycle,
//! so the sample spreads over what a real crash would see.
use super::start_latency::wait_connected;
use super::stats::{loadavg, ms, wall_ms, Sample};
use super::Setup;
use crate::process::Agent;
use std::time::{Duration, Instant};

/// Give up on one trial after this long without a `node_lost` event.
const DETECT_LIMIT: Duration = Duration::from_secs(20);

/// A pseudo-random delay in [0, 1000) ms from the clock's nanoseconds: the
/// kill's phase against the agent's 1 s heartbeat.
fn phase() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(u64::from(nanos.wrapping_mul(2_654_435_761) % 1000))
}

/// `bench node-loss`.
pub fn run(setup: &Setup, trials: usize) -> Result<(), String> {
    let dir = setup.scratch("node-loss");
    let cp = setup.control_plane(&dir, &[]);
    let op = cp.operator();
    let before = loadavg();
    let (mut server, mut client) = (Vec::new(), Vec::new());
    for i in 0..trials {
        let name = format!("doomed-{i}");
        let mut agent = Agent::start(&setup.bin, &cp, &name, "2xA100-80GB", &dir);
        if !wait_connected(&cp, &[name.as_str()], Duration::from_secs(20)) {
            return Err(format!(
                "{name} did not connect; see {}",
                agent.log.display()
            ));
        }
        // A few heartbeats in, then a kill at a random point of the cycle.
        std::thread::sleep(Duration::from_millis(2000) + phase());
        let killed_ms = wall_ms();
        let killed = Instant::now();
        agent.kill9();
        let path = format!("/v1/events?node={name}");
        let mut lost_ms = None;
        while killed.elapsed() < DETECT_LIMIT && lost_ms.is_none() {
            std::thread::sleep(Duration::from_millis(10));
            let events = op.get(&path).data()["events"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            lost_ms = events
                .iter()
                .find(|e| e["kind"] == "node_lost")
                .and_then(|e| e["at_ms"].as_u64());
        }
        let seen = killed.elapsed();
        let Some(at) = lost_ms else {
            return Err(format!("{name}: no node_lost within {DETECT_LIMIT:?}"));
        };
        let detected = Duration::from_millis(at.saturating_sub(killed_ms));
        println!(
            "trial {i}: node_lost {} after kill -9 (seen by the client after {})",
            ms(detected),
            ms(seen)
        );
        server.push(detected);
        client.push(seen);
    }
    let server = Sample::new(server);
    let client = Sample::new(client);
    println!(
        "node-loss: {trials} trials, heartbeat 1000 ms, node timeout 4000 ms (server defaults); load before {before}, after {}",
        loadavg()
    );
    println!("kill -9 -> node_lost event at_ms: {}", server.describe());
    println!("kill -9 -> client sees node_lost: {}", client.describe());
    println!("\n| clock | median | p95 | max |");
    println!("|---|---:|---:|---:|");
    for (name, s) in [
        ("server event at_ms - kill instant", &server),
        ("client sees the event", &client),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            ms(s.pct(50.0)),
            ms(s.pct(95.0)),
            ms(s.max())
        );
    }
    drop(cp);
    setup.clean(&dir);
    Ok(())
}
