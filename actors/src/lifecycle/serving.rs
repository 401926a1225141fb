//! What a running replica serves, as its node reports it: where it is
//! reached (the port its agent gave it, at the node's address), whether it
//! is ready (its readiness probe), and which model generation runs (an
//! in-place swap). Only the record changes; it is persisted before the
//! news counts, and the endpoints API lists a replica only once it is ready.
use super::{steps, Outcome, Step};
use caldera_spec::{Endpoint, TaskRecord, TaskState};

/// The process started with `port` of the node at `address`: the
/// replica's endpoint, not ready until its first readiness report. None
/// without a port (a reservation, an agent without replica ports).
pub(super) fn started_at(port: Option<u16>, address: &str) -> Option<Step> {
    let port = port?;
    Some(Step::Serve {
        endpoint: Some(Endpoint {
            address: address.to_string(),
            port,
        }),
    })
}

/// A readiness report: recorded when it is about the generation that runs
/// and changes what the record says.
pub(super) fn readiness(rec: &TaskRecord, ready: bool, generation: u32) -> Outcome {
    if rec.state != TaskState::Running {
        return Outcome::Ignored("readiness of a workload that is not running");
    }
    if generation != rec.generation {
        return Outcome::Ignored("readiness of another generation than the one running");
    }
    if ready == rec.ready {
        return Outcome::Ignored("readiness unchanged");
    }
    steps(vec![Step::SetReady(ready)])
}

/// What a node's `Swapped` says runs now.
pub(super) struct SwappedTo<'a> {
    pub generation: u32,
    pub model: &'a str,
    /// Where it is reached now, when that moved (a new container on
    /// another port of the same node).
    pub port: Option<u16>,
    /// The image and digest its container runs (None: a process).
    pub image: Option<&'a str>,
    pub image_digest: Option<&'a str>,
}

/// The node restarted the workload in place on `model`: that generation
/// runs now, not ready until its probe says so; a container's new port
/// becomes the endpoint, its image's digest the allocation's, and the
/// history says which image and digest run. An older or repeated
/// generation changes nothing (the node answers a resent swap again).
pub(super) fn swapped(rec: &TaskRecord, to: &SwappedTo, address: &str) -> Outcome {
    if rec.state != TaskState::Running {
        return Outcome::Ignored("a swap of a workload that is not running");
    }
    if to.generation <= rec.generation {
        return Outcome::Ignored("a generation already recorded");
    }
    let mut s = vec![Step::RecordSwap {
        generation: to.generation,
        model: to.model.to_string(),
    }];
    s.extend(to.port.and_then(|port| started_at(Some(port), address)));
    if let Some(digest) = to.image_digest {
        s.push(Step::RecordImageDigest(digest.to_string()));
    }
    if let Some(image) = to.image {
        let mut message = format!(
            "runs {} (generation {}) in image {image}",
            to.model, to.generation
        );
        if let Some(digest) = to.image_digest {
            message.push_str(&format!(" ({digest})"));
        }
        if let Some(port) = to.port {
            message.push_str(&format!(", now at port {port}"));
        }
        s.push(Step::Record {
            kind: caldera_spec::EventKind::ModelSwap,
            message,
        });
    }
    steps(s)
}

/// Applies the serving steps to the record (see `apply_to_record`).
pub(super) fn apply(rec: &mut TaskRecord, step: &Step) -> bool {
    match step {
        Step::Serve { endpoint } => {
            rec.endpoint = endpoint.clone();
            rec.ready = false;
        }
        Step::SetReady(ready) => rec.ready = *ready,
        Step::RecordSwap { generation, model } => {
            rec.generation = *generation;
            rec.serving_model = Some(model.clone());
            rec.ready = false;
        }
        _ => return false,
    }
    true
}

/// A new run (a grant or a requeue): nothing is served until it starts.
pub(super) fn reset(rec: &mut TaskRecord) {
    rec.endpoint = None;
    rec.ready = false;
    rec.generation = 0;
    rec.serving_model = rec.spec.model.clone();
}

#[cfg(test)]
mod tests {
    use super::super::tests::{news, task};
    use super::super::{decide, Outcome, Step};
    use caldera_spec::wire::WorkloadEventKind;
    use caldera_spec::{Endpoint, TaskState};

    fn running() -> caldera_spec::TaskRecord {
        let mut r = task(TaskState::Running);
        r.endpoint = Some(Endpoint {
            address: "10.0.0.5".into(),
            port: 20001,
        });
        r
    }

    #[test]
    fn a_start_records_its_endpoint_at_the_nodes_address_not_ready() {
        let out = decide(
            &task(TaskState::Ready),
            None,
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(4),
                port: Some(20001),
            }),
        );
        let Outcome::Steps(s) = out else {
            panic!("{out:?}")
        };
        assert!(s.contains(&Step::Serve {
            endpoint: Some(Endpoint {
                address: "10.0.0.5".into(),
                port: 20001
            })
        }));
    }

    #[test]
    fn a_start_after_a_resync_made_it_running_still_records_the_port() {
        let started = |port| {
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(4),
                port,
            })
        };
        let r = task(TaskState::Running);
        assert_eq!(
            decide(&r, None, started(Some(20002))),
            Outcome::Steps(vec![Step::Serve {
                endpoint: Some(Endpoint {
                    address: "10.0.0.5".into(),
                    port: 20002
                })
            }])
        );
        assert!(matches!(
            decide(&running(), None, started(Some(20002))),
            Outcome::Ignored(_)
        ));
    }

    #[test]
    fn readiness_counts_only_for_the_running_generation_and_when_it_changes() {
        let ready = |ready, generation| {
            news(WorkloadEventKind::Readiness {
                ready,
                generation,
                detail: String::new(),
            })
        };
        let r = running();
        assert_eq!(
            decide(&r, None, ready(true, 0)),
            Outcome::Steps(vec![Step::SetReady(true)])
        );
        assert!(matches!(
            decide(&r, None, ready(false, 0)),
            Outcome::Ignored(_)
        ));
        assert!(matches!(
            decide(&r, None, ready(true, 3)),
            Outcome::Ignored(_)
        ));
        let queued = task(TaskState::Queued);
        assert!(matches!(
            decide(&queued, None, ready(true, 0)),
            Outcome::Ignored(_)
        ));
    }

    #[test]
    fn a_swap_records_its_generation_and_model_once() {
        let swapped = |generation| {
            news(WorkloadEventKind::Swapped {
                generation,
                model: "llm:v4".into(),
                pid: Some(9),
                port: None,
                image: None,
                image_digest: None,
            })
        };
        let mut r = running();
        let out = decide(&r, None, swapped(1));
        assert_eq!(
            out,
            Outcome::Steps(vec![Step::RecordSwap {
                generation: 1,
                model: "llm:v4".into()
            }])
        );
        r.ready = true;
        let Outcome::Steps(s) = out else {
            unreachable!()
        };
        super::apply(&mut r, &s[0]);
        assert_eq!(
            (r.generation, r.serving_model.as_deref(), r.ready),
            (1, Some("llm:v4"), false)
        );
        assert!(matches!(decide(&r, None, swapped(1)), Outcome::Ignored(_)));
    }

    #[test]
    fn a_container_swap_moves_the_endpoint_and_records_the_image_and_digest_it_runs() {
        let digest = format!("sha256:{}", "cd".repeat(32));
        let out = decide(
            &running(),
            None,
            news(WorkloadEventKind::Swapped {
                generation: 2,
                model: "llm:v4".into(),
                pid: Some(9),
                port: Some(20007),
                image: Some("registry.internal/app:2".into()),
                image_digest: Some(digest.clone()),
            }),
        );
        let Outcome::Steps(s) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            s[..3],
            [
                Step::RecordSwap {
                    generation: 2,
                    model: "llm:v4".into()
                },
                Step::Serve {
                    endpoint: Some(Endpoint {
                        address: "10.0.0.5".into(),
                        port: 20007
                    })
                },
                Step::RecordImageDigest(digest.clone()),
            ]
        );
        let Step::Record { message, .. } = &s[3] else {
            panic!("{s:?}")
        };
        assert_eq!(
            message,
            &format!("runs llm:v4 (generation 2) in image registry.internal/app:2 ({digest}), now at port 20007")
        );
    }
}
