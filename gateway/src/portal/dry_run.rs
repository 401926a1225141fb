//! The submit form's dry run: where the request would go now, or why not
//! and when it should start, as `POST /v1/tasks?dry_run=true` answers
//! (`{placeable, node, gpu_indices, reason, estimated_start_ms}`). Shown
//! from that answer's own type, so the page follows the API's view.
use crate::api::tasks as api;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use caldera_actors::control_plane::DryRun;
use caldera_spec::time::rfc3339;
use caldera_spec::views::Admission;
use caldera_spec::TaskSpec;
use maud::{html, Markup};

/// The dry run's answer (the API's `data`), or the API's error: the
/// control plane's own dry run, as `POST /v1/tasks?dry_run=true` answers.
pub async fn answer(
    st: &AppState,
    caller: &User,
    tenant: &str,
    spec: TaskSpec,
) -> Result<DryRun, ApiError> {
    api::dry_run(st, caller, Some(tenant), spec).await
}

/// A tenant's standing as the API writes it (`over_quota`).
fn admission_name(a: Admission) -> &'static str {
    match a {
        Admission::Guaranteed => "guaranteed",
        Admission::Borrowing => "borrowing",
        Admission::OverQuota => "over_quota",
    }
}

/// The answer as the form shows it below itself.
pub fn render(answer: Result<DryRun, ApiError>) -> Markup {
    match answer {
        Err(e) => html! {
            div.dry-run.refused data-code=(e.code().code) {
                h2 { "Dry run" }
                p.field-error { (e.message()) " (" (e.code().code) " " (e.code().name) ")" }
            }
        },
        Ok(v) => {
            let gpus: Vec<String> = v.gpu_indices.iter().map(|i| i.to_string()).collect();
            html! {
                div.dry-run data-placeable=(v.placeable) {
                    h2 { "Dry run" }
                    (preempts_warning(&v))
                    @if v.placeable {
                        p { "It would start now on " strong { (v.node.as_deref().unwrap_or("?")) }
                            @if !gpus.is_empty() { ", GPUs " (gpus.join(", ")) } "." }
                    } @else if !would_preempt(&v) {
                        p { "It would wait: " (v.reason.as_deref().unwrap_or("no reason given")) }
                        p { "Estimated start: " @match v.estimated_start_ms {
                            Some(ms) => { (rfc3339(ms)) }
                            None => { "unknown (nothing running ends in time for it)" }
                        } }
                    }
                    p.note { "Quota: " (admission_name(v.admission)) }
                }
            }
        }
    }
}

/// Whether the answer says submitting preempts running work.
pub fn would_preempt(v: &DryRun) -> bool {
    !v.preempts.is_empty()
}

/// The warning that submitting would stop running tasks: each victim, its
/// GPUs and priority, and when the request would start. Empty when it
/// preempts nothing.
pub fn preempts_warning(v: &DryRun) -> Markup {
    let victims = &v.preempts;
    if victims.is_empty() {
        return html! {};
    }
    html! {
        div.preempt-warning role="alert" data-preempts=(victims.len()) {
            p { strong { "Submitting this preempts running work: " }
                (victims.len()) " task(s) on " (v.node.as_deref().unwrap_or("?"))
                " would be stopped (checkpointed first) to make room." }
            ul {
                @for t in victims {
                    li.victim {
                        (t.task) " — " (t.gpus) " GPU(s), priority " (t.priority) " (" (t.reason) ")"
                    }
                }
            }
            @if let Some(ms) = v.estimated_start_ms {
                p { "It would start at about " (rfc3339(ms)) ", once they have stopped." }
            }
            p.note { "A lower priority (medium is the default) waits for room instead." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standing_is_named_as_the_api_writes_it() {
        for a in [
            Admission::Guaranteed,
            Admission::Borrowing,
            Admission::OverQuota,
        ] {
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", admission_name(a)));
        }
    }
}
