//! The control plane's commit fail points, driven through the operator's
//! test endpoint `/v1/test/failpoints` (present only in test builds of the
//! `caldera` binary), and the rebuild counters of `/metrics` that show a
//! failed commit stopped an actor and its supervisor rebuilt it.
use crate::http::Api;
use crate::process::wait_until;
use std::time::Duration;

impl Api {
    /// Lets `skip` commits at `site` (`any`: every site) through, then refuses `fail`.
    pub fn arm_fault(&self, site: &str, skip: u64, fail: u64) {
        let body = format!(r#"{{"skip":{skip},"fail":{fail}}}"#);
        let r = self.put(&format!("/v1/test/failpoints/{site}"), &body);
        assert_eq!(
            r.status, 200,
            "arming {site}: {:?} (is the binary built with the failpoints feature?)",
            r.body
        );
    }

    /// Removes every fail point.
    pub fn clear_faults(&self) {
        let r = self.request("DELETE", "/v1/test/failpoints", None);
        assert_eq!(r.status, 200, "clearing fail points: {:?}", r.body);
    }

    /// `(committed, refused)` at `site` since the server started.
    pub fn commit_counts(&self, site: &str) -> (u64, u64) {
        let r = self.get("/v1/test/failpoints");
        let c = &r.data()["counts"][site];
        (
            c["committed"].as_u64().unwrap_or(0),
            c["refused"].as_u64().unwrap_or(0),
        )
    }

    /// Commits made at every site together (what a sweep counts to).
    pub fn commits_total(&self) -> u64 {
        let r = self.get("/v1/test/failpoints");
        r.data()["counts"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, c)| c["committed"].as_u64().unwrap_or(0) + c["refused"].as_u64().unwrap_or(0))
            .sum()
    }

    /// Waits until `site` has refused `n` commits in all; panics naming it otherwise.
    pub fn wait_refused(&self, site: &str, n: u64, secs: u64) {
        let ok = wait_until(Duration::from_secs(secs), || {
            self.commit_counts(site).1 >= n
        });
        assert!(
            ok,
            "{site}: {n} refused commit(s) not reached: {:?}",
            self.commit_counts(site)
        );
    }

    /// `caldera_actor_rebuilds_total{kind}` from `/metrics`.
    pub fn rebuilds(&self, kind: &str) -> u64 {
        let r = self.get("/metrics");
        let text = r.body.as_str().unwrap_or_default().to_string();
        let prefix = format!("caldera_actor_rebuilds_total{{kind=\"{kind}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits until `kind` was rebuilt more than `before` times.
    pub fn wait_rebuilt(&self, kind: &str, before: u64, secs: u64) {
        let ok = wait_until(Duration::from_secs(secs), || self.rebuilds(kind) > before);
        assert!(ok, "no {kind} actor was rebuilt (still {before})");
    }
}
