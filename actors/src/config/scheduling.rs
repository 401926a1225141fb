//! `[scheduling]`: how the live scheduler places, preempts, times out and
//! reclaims work.
use super::key::section;
use super::ConfigError;
use caldera_scheduling::placement::PolicyName;

section! {
    /// Placement, preemption, time limits and the idle inspector.
    pub struct SchedulingSection = "scheduling" {
        /// Placement policy of the live scheduler.
        placement_policy: String = "caldera".into(), was "placement-policy";
        /// Seed of the placement tie-break.
        placement_seed: u64 = 42, was "placement-seed";
        /// A task restarted after a preemption or node loss cannot be
        /// preempted again before it has run this long, ms (stops eviction
        /// ping-pong).
        preemption_min_runtime_ms: u64 = 60_000, was "preemption-min-runtime-ms";
        /// How long past its declared `duration` a training task or
        /// reservation may run before its time limit stops it (training:
        /// checkpoint signal, stop grace, then failed with reason
        /// `time_limit`; a reservation is released), ms.
        time_limit_grace_ms: u64 = 60_000, was "time-limit-grace-ms";
        /// How long a replacement replica must have run before a drain stops
        /// the replica it replaces, ms (Kubernetes' `minReadySeconds`: a
        /// started process is not yet a serving one).
        replica_min_ready_ms: u64 = 1000, was "replica-min-ready-ms";
        /// A task stuck in Preparing this long fails, ms.
        preparing_timeout_ms: u64 = 120_000, was "preparing-timeout-ms";
        /// Queue a request no registered node could ever hold (pending
        /// reason `unschedulable: ...`) instead of refusing it with 422.
        accept_unschedulable: bool = false, was "accept-unschedulable";
        /// How many nodes may pull one image at once; the starts (and
        /// pre-pulls) of the others wait in Preparing until one of those
        /// pulls ends.
        max_image_pulls: u32 = 2, was "max-image-pulls";
        /// An allocation using less than this (GPU utilisation, or CPU % for
        /// CPU-only work) counts as idle.
        idle_threshold_pct: f32 = 5.0, was "idle-threshold-pct";
        /// Idle this long gets a warning, ms; 0 disables the inspector.
        idle_window_ms: u64 = 1_800_000, was "idle-window-ms";
        /// Still idle this long after the warning is reclaimed, ms.
        idle_grace_ms: u64 = 1_800_000, was "idle-grace-ms";
        /// Period of the idle inspector and of the tenant usage samples, ms.
        usage_sample_ms: u64 = 10_000, was "usage-sample-ms";
    }
}

impl SchedulingSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("scheduling.preparing-timeout-ms", self.preparing_timeout_ms),
            (
                "scheduling.max-image-pulls",
                u64::from(self.max_image_pulls),
            ),
            ("scheduling.usage-sample-ms", self.usage_sample_ms),
        ];
        if let Some(&(key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::new(key, "must be greater than 0"));
        }
        // Checked here, not when the Scheduler starts: there an unknown name
        // would surface as a boot ("storage") failure that names no key.
        if self.placement_policy.parse::<PolicyName>().is_err() {
            let known: Vec<&str> = PolicyName::ALL.iter().map(|p| p.as_str()).collect();
            return Err(ConfigError::new(
                "scheduling.placement-policy",
                format!(
                    "unknown policy {:?}; known policies: {}",
                    self.placement_policy,
                    known.join(", ")
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_placement_policy_is_refused_naming_the_key_and_the_known_ones() {
        let c = SchedulingSection {
            placement_policy: "tetris".into(),
            ..Default::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "scheduling.placement-policy");
        assert!(e.message.contains("\"tetris\""), "{e}");
        for p in PolicyName::ALL {
            assert!(e.message.contains(p.as_str()), "{e}");
        }
        let known = SchedulingSection {
            placement_policy: "fgd".into(),
            ..Default::default()
        };
        assert_eq!(known.validate(), Ok(()));
    }

    #[test]
    fn zero_image_pulls_is_refused_naming_the_key() {
        let c = SchedulingSection {
            max_image_pulls: 0,
            ..Default::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "scheduling.max-image-pulls");
        assert_eq!(
            e.to_string(),
            "config key scheduling.max-image-pulls ([scheduling] max-image-pulls in a file, \
             CALDERA_SCHEDULING__MAX_IMAGE_PULLS in the environment): must be greater than 0"
        );
    }
}
