//! The submit form's dry run: where the request would go now, or why not
//! and when it should start, as `POST /v1/tasks?dry_run=true` answers
//! (`{placeable, node, gpu_indices, reason, estimated_start_ms}`). Shown
//! from that answer's JSON, so the page follows the API's own view.
use crate::error::ApiError;
use crate::state::AppState;
use caldera_spec::time::rfc3339;
use caldera_spec::TaskSpec;
use maud::{html, Markup};
use serde_json::Value;

/// The dry run's answer (the API's `data`), or the API's error: the
/// control plane's own dry run, as `POST /v1/tasks?dry_run=true` answers.
pub async fn answer(st: &AppState, tenant: String, spec: TaskSpec) -> Result<Value, ApiError> {
    let view = st.cp.dry_run(tenant, spec).await?;
    serde_json::to_value(view).map_err(|e| {
        ApiError::new(
            &caldera_spec::codes::STORAGE_ENCODE,
            format!("the dry run's answer could not be shown: {e}"),
        )
    })
}

/// The answer as the form shows it below itself.
pub fn render(answer: Result<Value, ApiError>) -> Markup {
    match answer {
        Err(e) => html! {
            div.dry-run.refused data-code=(e.code().code) {
                h2 { "Dry run" }
                p.field-error { (e.message()) " (" (e.code().code) " " (e.code().name) ")" }
            }
        },
        Ok(v) => {
            let placeable = v["placeable"].as_bool().unwrap_or(false);
            let gpus: Vec<String> = v["gpu_indices"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
                .map(|i| i.to_string())
                .collect();
            let start = v["estimated_start_ms"].as_u64();
            html! {
                div.dry-run data-placeable=(placeable) {
                    h2 { "Dry run" }
                    (preempts_warning(&v))
                    @if placeable {
                        p { "It would start now on " strong { (v["node"].as_str().unwrap_or("?")) }
                            @if !gpus.is_empty() { ", GPUs " (gpus.join(", ")) } "." }
                    } @else if !would_preempt(&v) {
                        p { "It would wait: " (v["reason"].as_str().unwrap_or("no reason given")) }
                        p { "Estimated start: " @match start {
                            Some(ms) => { (rfc3339(ms)) }
                            None => { "unknown (nothing running ends in time for it)" }
                        } }
                    }
                    @if let Some(a) = v["admission"].as_str() { p.note { "Quota: " (a) } }
                }
            }
        }
    }
}

/// Whether the answer says submitting preempts running work.
pub fn would_preempt(v: &Value) -> bool {
    v["preempts"].as_array().is_some_and(|a| !a.is_empty())
}

/// The warning that submitting would stop running tasks: each victim, its
/// GPUs and priority, and when the request would start. Empty when it
/// preempts nothing.
pub fn preempts_warning(v: &Value) -> Markup {
    let victims = v["preempts"].as_array().cloned().unwrap_or_default();
    if victims.is_empty() {
        return html! {};
    }
    html! {
        div.preempt-warning role="alert" data-preempts=(victims.len()) {
            p { strong { "Submitting this preempts running work: " }
                (victims.len()) " task(s) on " (v["node"].as_str().unwrap_or("?"))
                " would be stopped (checkpointed first) to make room." }
            ul {
                @for t in &victims {
                    li.victim {
                        (t["task"].as_str().unwrap_or("?")) " — "
                        (t["gpus"].as_u64().unwrap_or(0)) " GPU(s), priority "
                        (t["priority"].as_str().unwrap_or("?")) " ("
                        (t["reason"].as_str().unwrap_or("")) ")"
                    }
                }
            }
            @if let Some(ms) = v["estimated_start_ms"].as_u64() {
                p { "It would start at about " (rfc3339(ms)) ", once they have stopped." }
            }
            p.note { "A lower priority (medium is the default) waits for room instead." }
        }
    }
}
