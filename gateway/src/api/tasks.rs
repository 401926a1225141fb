//! Tasks: submit (or dry-run), read, list, logs, release, scale and swap a
//! service's model. Task ids are the tenant's own, so every address of a
//! task needs a tenant: a tenant token's own, or the one the operator names.
use super::query::{query_num, query_offset};
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use caldera_actors::control_plane::{DryRun, TaskQuery};
use caldera_actors::views::{TaskView, UsePoint};
use caldera_spec::validate::MAX_REPLICAS;
use caldera_spec::views::{LogChunk, TaskPage};
use caldera_spec::{codes, SpecError, SpecErrorKind, TaskRecord, TaskSpec, TaskState, TaskType};
use std::collections::HashMap;

/// The tenant a call acts for: a tenant token's own (naming another is
/// refused: a tenant token `refused`), or the one the operator names;
/// `None` for the operator naming none.
pub fn acting_tenant(
    caller: &User,
    asked: Option<&str>,
    refused: &str,
) -> Result<Option<String>, ApiError> {
    match (caller.tenant(), asked) {
        (Some(t), None) => Ok(Some(t.to_string())),
        (Some(t), Some(asked)) if asked == t => Ok(Some(t.to_string())),
        (Some(_), Some(_)) => Err(ApiError::forbidden(&format!("a tenant token {refused}"))),
        (None, asked) => Ok(asked.map(str::to_string)),
    }
}

/// The tenant a submission is for: a tenant token's own, or the one the
/// operator names (the operator must name one).
pub fn submitting_tenant(caller: &User, asked: Option<&str>) -> Result<String, ApiError> {
    acting_tenant(caller, asked, "submits only for its own tenant")?.ok_or_else(|| {
        ApiError::bad_query(
            "tenant",
            "the operator submits on behalf of a tenant: add ?tenant=NAME",
        )
    })
}

/// Submits `spec` for `tenant` (see [`submitting_tenant`]): the task as
/// created, or the existing one when the identical spec was submitted before
/// (`false`), with the warnings a submission carries.
pub async fn submit(
    st: &AppState,
    caller: &User,
    tenant: Option<&str>,
    spec: TaskSpec,
) -> Result<(TaskView, bool), ApiError> {
    let tenant = submitting_tenant(caller, tenant)?;
    let (rec, created) = st.cp.submit(tenant, spec).await?;
    let mut view = TaskView::from(&rec);
    view.warnings = st.cp.submission_warnings(&rec.spec).await?;
    Ok((view, created))
}

/// Where `spec` would go now for `tenant`, or why not and when it would
/// start; nothing is created.
pub async fn dry_run(
    st: &AppState,
    caller: &User,
    tenant: Option<&str>,
    spec: TaskSpec,
) -> Result<DryRun, ApiError> {
    let tenant = submitting_tenant(caller, tenant)?;
    Ok(st.cp.dry_run(tenant, spec).await?)
}

/// A task the caller may see: made only by [`find`], so holding one means
/// the tenant checks passed. Every action on a task takes one.
pub struct VisibleTask {
    /// The id as the caller named it (the tenant's own).
    pub id: String,
    /// Its key inside the control plane (`tenant/id`).
    pub key: String,
    pub record: TaskRecord,
}

/// The key (`tenant/id`) of the task `id` of `tenant` (see
/// [`acting_tenant`]). An operator naming no tenant reaches the id when
/// exactly one tenant holds it; when several do, a 409 asks for the tenant
/// (the operator sees every tenant, so naming them reveals nothing).
async fn address(
    st: &AppState,
    caller: &User,
    tenant: Option<&str>,
    id: &str,
) -> Result<String, ApiError> {
    match acting_tenant(caller, tenant, "addresses only its own tenant's tasks")? {
        Some(tenant) => Ok(caldera_spec::task_key(&tenant, id)),
        None => {
            let mut keys = st.cp.task_keys_named(id).await?;
            match keys.len() {
                0 => Err(ApiError::not_found("task", id)),
                1 => Ok(keys.remove(0)),
                _ => {
                    let tenants: Vec<&str> = keys
                        .iter()
                        .filter_map(|k| caldera_spec::tenant_of(k))
                        .collect();
                    Err(ApiError::new(
                        &codes::CONFLICT,
                        format!(
                            "task id {id:?} is used by tenants {}: add ?tenant=NAME",
                            tenants.join(", ")
                        ),
                    ))
                }
            }
        }
    }
}

/// The task `id` of `tenant` if the caller may see it, or the 404 (another
/// tenant's task is "not found", and the message names only the id given).
pub async fn find(
    st: &AppState,
    caller: &User,
    tenant: Option<&str>,
    id: &str,
) -> Result<VisibleTask, ApiError> {
    let key = address(st, caller, tenant, id).await?;
    match st.cp.task(&key).await? {
        Some(record) if caller.may_see(&record.tenant) => Ok(VisibleTask {
            id: id.to_string(),
            key,
            record,
        }),
        _ => Err(ApiError::not_found("task", id)),
    }
}

/// The task as the API shows it, with its place in line when it waits.
pub async fn view(st: &AppState, task: &VisibleTask) -> Result<TaskView, ApiError> {
    let r = &task.record;
    let mut view = TaskView::from(r);
    if r.state == TaskState::Queued {
        let line = st.cp.queue_positions(vec![r.spec.task_id.clone()]).await?;
        // Inside the control plane a task's id is its key (`tenant/id`).
        view.queue_position = line.get(&r.spec.task_id).copied();
    }
    Ok(view)
}

/// The task `id` of `tenant` as the caller may see it ([`find`], [`view`]).
pub async fn get(
    st: &AppState,
    caller: &User,
    tenant: Option<&str>,
    id: &str,
) -> Result<TaskView, ApiError> {
    let task = find(st, caller, tenant, id).await?;
    view(st, &task).await
}

/// Which tasks a listing wants. `tenant` is the tenant asked for (a tenant
/// token may name only its own; [`list`] checks it).
#[derive(Debug, Clone, Default)]
pub struct TaskListQuery {
    pub tenant: Option<String>,
    pub state: Option<TaskState>,
    pub task_type: Option<TaskType>,
    /// The last id (a tenant's) or key (the operator's) seen; "" from the start.
    pub cursor: String,
    /// 1..=1000.
    pub limit: usize,
}

/// The tenant check of a listing, as a tenant token hears it refused.
const LISTS_OWN: &str = "lists only its own tenant's tasks";

impl TaskListQuery {
    /// `?state=&type=&tenant=&cursor=&limit=` of `GET /v1/tasks`, each bad
    /// one named, checked in that order (the tenant for `caller`).
    pub fn from_query(caller: &User, q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let state = match q.get("state") {
            None => None,
            Some(s) => Some(
                TaskState::parse(s)
                    .ok_or_else(|| ApiError::bad_query("state", format!("unknown state {s:?}")))?,
            ),
        };
        let task_type = match q.get("type").map(|s| s.as_str()) {
            None => None,
            Some("training") => Some(TaskType::Training),
            Some("inference") => Some(TaskType::Inference),
            Some(other) => {
                return Err(ApiError::bad_query(
                    "type",
                    format!("type is training or inference, not {other:?}"),
                ))
            }
        };
        let tenant = q.get("tenant").map(String::as_str);
        Ok(TaskListQuery {
            tenant: acting_tenant(caller, tenant, LISTS_OWN)?,
            state,
            task_type,
            cursor: q.get("cursor").cloned().unwrap_or_default(),
            limit: query_num(q, "limit", 100, 1000)? as usize,
        })
    }
}

/// The control plane's page of the records `query` asks for, within what
/// the caller may see.
async fn page(
    st: &AppState,
    caller: &User,
    query: TaskListQuery,
) -> Result<caldera_actors::control_plane::TaskPage, ApiError> {
    let query = TaskQuery {
        tenant: acting_tenant(caller, query.tenant.as_deref(), LISTS_OWN)?,
        state: query.state,
        task_type: query.task_type,
        cursor: query.cursor,
        limit: query.limit,
    };
    Ok(st.cp.tasks(query).await?)
}

/// The records of a page of tasks the caller may see, as they are stored
/// (no views, no places in line): for a reader that needs one field of
/// each, such as a service's swap.
pub async fn records(
    st: &AppState,
    caller: &User,
    query: TaskListQuery,
) -> Result<Vec<TaskRecord>, ApiError> {
    Ok(page(st, caller, query).await?.tasks)
}

/// A page of the tasks the caller may see, each queued one with its place
/// in line: a tenant's ordered by its own ids, the operator's by key.
pub async fn list(
    st: &AppState,
    caller: &User,
    query: TaskListQuery,
) -> Result<TaskPage, ApiError> {
    let page = page(st, caller, query).await?;
    // Places in line of this page's queued tasks only: one pass over the
    // queue, never a copy of it, however long it is.
    let queued: Vec<String> = page
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::Queued)
        .map(|t| t.spec.task_id.clone())
        .collect();
    let line = st.cp.queue_positions(queued).await?;
    let tasks: Vec<TaskView> = page
        .tasks
        .iter()
        .map(|t| {
            let mut view = TaskView::from(t);
            view.queue_position = line.get(&t.spec.task_id).copied();
            view
        })
        .collect();
    Ok(TaskPage {
        tasks,
        next_cursor: page.next_cursor,
    })
}

/// Stops and frees the task (a queued one is cancelled), in the caller's
/// name; one already ended is answered as it ended.
pub async fn release(
    st: &AppState,
    caller: &User,
    task: VisibleTask,
) -> Result<TaskView, ApiError> {
    let by = match caller.tenant() {
        Some(t) => format!("tenant {t}"),
        None => "operator".to_string(),
    };
    // No live actor: already terminal, and releasing again changes nothing.
    let rec = st.cp.release(&task.key, by).await?.unwrap_or(task.record);
    Ok(TaskView::from(&rec))
}

/// Which part of a log to read: the last `tail_bytes`, or (following a
/// log) from `from_byte` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRange {
    /// 1..=16 MiB.
    pub tail_bytes: u64,
    pub from_byte: Option<u64>,
}

/// The longest tail a log read answers.
const MAX_TAIL_BYTES: u64 = 16 * 1024 * 1024;

impl LogRange {
    /// `?tail_bytes=&from_byte=` (default: the last 64 KiB) of a read of
    /// `task`'s log, each bad one named.
    pub fn from_query(task: &VisibleTask, q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let tail_bytes = query_num(q, "tail_bytes", 64 * 1024, MAX_TAIL_BYTES)?;
        LogRange::with_tail(task, q, tail_bytes)
    }

    /// `tail_bytes`, and `?from_byte=` when it is read: a reservation that
    /// holds its room runs nothing, so its answer reads no offset.
    pub fn with_tail(
        task: &VisibleTask,
        q: &HashMap<String, String>,
        tail_bytes: u64,
    ) -> Result<Self, ApiError> {
        let rec = &task.record;
        let runs_nothing = rec.allocation.is_some() && rec.spec.is_reservation();
        let from_byte = if runs_nothing {
            None
        } else {
            query_offset(q, "from_byte")?
        };
        Ok(LogRange {
            tail_bytes,
            from_byte,
        })
    }
}

/// The task's log, fetched from the node that runs it (or last ran it).
pub async fn logs(
    st: &AppState,
    task: &VisibleTask,
    range: LogRange,
) -> Result<LogChunk, ApiError> {
    let rec = &task.record;
    let Some(a) = rec.allocation.clone() else {
        return earlier_logs(st, task, range).await;
    };
    if rec.spec.is_reservation() {
        // A reservation holds room and runs nothing: say so, rather than
        // answering an empty log as if a process had been silent.
        return Ok(LogChunk {
            task_id: task.id.clone(),
            node: a.node,
            allocation_id: None,
            content: String::new(),
            truncated: false,
            end_byte: None,
            reservation: Some(true),
            note: Some(
                "this task is a reservation: it runs no process, so it has no log".to_string(),
            ),
        });
    }
    let chunk = st.cp.logs(&a, range.tail_bytes, range.from_byte).await?;
    Ok(LogChunk {
        task_id: task.id.clone(),
        allocation_id: Some(caldera_spec::local_id(&a.allocation_id).to_string()),
        node: a.node,
        content: chunk.content,
        truncated: chunk.truncated,
        end_byte: chunk.end_byte,
        reservation: None,
        note: None,
    })
}

/// The log of a task that holds no allocation now but ran before (it was
/// preempted or requeued and waits to run again, or ended after that): read
/// from the node it last ran on, with a note saying so. One that never ran
/// has no log (409 `no_logs_yet`).
async fn earlier_logs(
    st: &AppState,
    task: &VisibleTask,
    range: LogRange,
) -> Result<LogChunk, ApiError> {
    let rec = &task.record;
    let not_yet = || {
        ApiError::new(
            &codes::NO_LOGS_YET,
            "the task has not run yet, so it has no logs",
        )
    };
    if rec.spec.is_reservation() {
        return Err(not_yet());
    }
    let Some(last) = st.cp.last_run(rec).await? else {
        return Err(not_yet());
    };
    let chunk = st
        .cp
        .logs_on(
            &last.node,
            &last.allocation_id,
            &rec.spec.task_id,
            range.tail_bytes,
            range.from_byte,
        )
        .await?;
    // "preempted by <task key>" would name another tenant's task.
    let why = match last.end_reason.as_deref() {
        Some(r) if r.starts_with("preempted") => "preempted",
        Some(r) => r,
        None => "stopped",
    };
    let when = last
        .ended_ms
        .map(|t| format!(" at {}", caldera_spec::time::rfc3339(t)))
        .unwrap_or_default();
    let next = if rec.state == TaskState::Queued {
        "; restarting when it is placed again"
    } else {
        ""
    };
    Ok(LogChunk {
        task_id: task.id.clone(),
        allocation_id: Some(caldera_spec::local_id(&last.allocation_id).to_string()),
        node: last.node.clone(),
        content: chunk.content,
        truncated: chunk.truncated,
        end_byte: chunk.end_byte,
        reservation: None,
        note: Some(format!(
            "not running now: {why}{when}{next}. This is the log of its earlier run(s) on {}.",
            last.node
        )),
    })
}

/// `replicas` if it is a service's size (1..=`MAX_REPLICAS`), else the
/// error naming the field.
pub fn check_replicas(replicas: u32) -> Result<u32, ApiError> {
    if replicas == 0 || replicas > MAX_REPLICAS {
        return Err(SpecError::new(
            SpecErrorKind::OutOfRange,
            "replicas",
            format!("replicas must be 1..={MAX_REPLICAS}"),
        )
        .into());
    }
    Ok(replicas)
}

/// Scales the service to `replicas` (1..=`MAX_REPLICAS`).
pub async fn scale(st: &AppState, task: &VisibleTask, replicas: u32) -> Result<TaskView, ApiError> {
    let n = check_replicas(replicas)?;
    let rec = st.cp.scale(&task.key, n).await?;
    Ok(TaskView::from(&rec))
}

/// The replicas of the service that hold an allocation now.
pub async fn replicas(st: &AppState, service: &VisibleTask) -> Result<Vec<TaskRecord>, ApiError> {
    Ok(st.cp.service_replicas(&service.key).await?)
}

/// What the task's live allocation was granted vs what its node measured,
/// oldest first; empty when it holds none.
pub async fn use_trail(st: &AppState, task: &VisibleTask) -> Result<Vec<UsePoint>, ApiError> {
    match &task.record.allocation {
        Some(a) => Ok(st.cp.use_trail(a.allocation_id.clone()).await?),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_actors::tokens::Principal;

    fn tenant(t: &str) -> User {
        User(Principal::Tenant(t.to_string()))
    }

    #[test]
    fn a_tenant_acts_for_itself_and_the_operator_for_whom_it_names() {
        let own = acting_tenant(&tenant("a"), None, "x").unwrap();
        assert_eq!(own.as_deref(), Some("a"));
        let named = acting_tenant(&tenant("a"), Some("a"), "x").unwrap();
        assert_eq!(named.as_deref(), Some("a"));
        let e = acting_tenant(&tenant("a"), Some("b"), "lists only its own").unwrap_err();
        assert_eq!(e.code().code, codes::FORBIDDEN.code);
        assert_eq!(e.message(), "a tenant token lists only its own");
        let op = User(Principal::Operator);
        assert_eq!(
            acting_tenant(&op, Some("b"), "x").unwrap().as_deref(),
            Some("b")
        );
        assert_eq!(acting_tenant(&op, None, "x").unwrap(), None);
        let e = submitting_tenant(&op, None).unwrap_err();
        assert_eq!(e.field(), Some("tenant"));
    }

    #[test]
    fn a_listing_query_names_its_bad_parameter_and_checks_them_in_order() {
        let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let t = tenant("a");
        let e = TaskListQuery::from_query(&t, &q(&[("state", "x"), ("tenant", "b")])).unwrap_err();
        assert_eq!(e.field(), Some("state"));
        let e = TaskListQuery::from_query(&t, &q(&[("tenant", "b"), ("limit", "0")])).unwrap_err();
        assert_eq!(
            e.code().code,
            codes::FORBIDDEN.code,
            "the tenant before the limit"
        );
        let e = TaskListQuery::from_query(&t, &q(&[("limit", "1001")])).unwrap_err();
        assert_eq!(e.field(), Some("limit"));
        let ok =
            TaskListQuery::from_query(&t, &q(&[("type", "inference"), ("limit", "5")])).unwrap();
        assert_eq!(ok.tenant.as_deref(), Some("a"));
        assert_eq!(ok.task_type, Some(TaskType::Inference));
        assert_eq!(ok.limit, 5);
    }

    #[test]
    fn replicas_out_of_range_are_refused_as_the_rest_body_is() {
        assert_eq!(check_replicas(1).unwrap(), 1);
        assert_eq!(check_replicas(MAX_REPLICAS).unwrap(), MAX_REPLICAS);
        for bad in [0, MAX_REPLICAS + 1] {
            let typed = check_replicas(bad).unwrap_err();
            let body = format!("{{\"replicas\":{bad}}}");
            let rest = ApiError::from(
                caldera_actors::control_plane::parse_replicas(body.as_bytes()).unwrap_err(),
            );
            assert_eq!(typed.field(), Some("replicas"));
            assert_eq!(typed.code().code, rest.code().code);
            assert_eq!(typed.message(), rest.message());
        }
    }
}
