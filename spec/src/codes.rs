//! The one registry of error codes. Every error any Caldera crate answers with,
//! prints or logs maps to exactly one [`ErrorCode`] here, so a client (or a
//! person reading a log) can branch on a number that never changes meaning.
//!
//! The scheme:
//! - `4SSxx` / `5SSxx`: answers of the HTTP API. The first three digits are the
//!   HTTP status (`40400` is a 404), so the status is never a separate guess.
//! - `1PPxx`: errors of a process, never an HTTP answer (`http_status` 0):
//!   `100xx` the control-plane server, `101xx` the node agent, `102xx` a
//!   workload the agent could not start, `103xx` the placement engine
//!   (internal inconsistencies, shown as pending reasons and sim failures),
//!   `104xx` `caldera sim`'s trace loading.
//!
//! `docs/reference/errors.md` is generated from this registry (`scripts/reference`),
//! so the documented codes are exactly these.

/// One stable error: its number, its machine-readable name, the HTTP status it
/// is answered with (0: never an HTTP answer), and what it means.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode {
    pub code: u32,
    pub name: &'static str,
    pub http_status: u16,
    pub meaning: &'static str,
}

macro_rules! registry {
    ($($id:ident = $code:literal, $name:literal, $status:literal, $meaning:literal;)*) => {
        $(
            #[doc = $meaning]
            pub const $id: ErrorCode = ErrorCode {
                code: $code,
                name: $name,
                http_status: $status,
                meaning: $meaning,
            };
        )*
        /// Every registered error, in code order.
        pub const ALL: &[ErrorCode] = &[$($id),*];
    };
}

registry! {
    // Process errors: printed or logged, never an HTTP answer.
    SERVER_CONFIG_INVALID = 10001, "server_config_invalid", 0, "the control plane's configuration is unusable; the message names the key";
    SERVER_BIND_FAILED = 10002, "server_bind_failed", 0, "the control plane cannot listen on its address";
    SERVER_STORAGE_FAILED = 10003, "server_storage_failed", 0, "the control plane cannot open, rebuild from or flush its data directory";
    SERVER_IO_FAILED = 10004, "server_io_failed", 0, "the HTTP server stopped on an I/O error";
    NODE_SECRET_INVALID = 10005, "node_secret_invalid", 0, "a hello for a registered node name without its node secret, or with a wrong one";
    NODE_SESSION_LIVE = 10006, "node_session_live", 0, "a hello for a node name that already has a live session";
    NODE_REVOKED = 10007, "node_revoked", 0, "a hello for a node an operator revoked";
    NODE_REPORT_REFUSED = 10008, "node_report_refused", 0, "a node's event or report for an allocation it does not hold under its current epoch, or a checkpoint outside the task's checkpoint dir";
    NODE_HELLO_UNANSWERED = 10009, "node_hello_unanswered", 0, "a hello the control plane could not answer (its Scheduler was not answering); the agent says hello again, and no workload is touched";
    AGENT_CONFIG_INVALID = 10101, "config_invalid", 0, "the node agent's configuration is unusable; the message names the value";
    SIMULATE_GPUS_INVALID = 10102, "simulate_gpus_invalid", 0, "the agent's --simulate-gpus value cannot be parsed";
    DATA_DIR_UNUSABLE = 10103, "data_dir_unusable", 0, "the agent's data dir cannot be created or written";
    RUNTIME_FAILED = 10104, "runtime_failed", 0, "the agent's async runtime or signal handlers could not be set up";
    PROBE_FAILED = 10105, "probe_failed", 0, "the agent could not probe the host's hardware";
    NODE_SECRET_UNUSABLE = 10106, "node_secret_unusable", 0, "the agent cannot read or write its node secret file in the data dir";
    AGENT_DRAIN_INCOMPLETE = 10107, "drain_incomplete", 0, "the agent was asked to stop, and the control plane had not moved all its work away within drain-timeout-ms; the log names what it left, which is then stopped";
    CACHE_UNUSABLE = 10108, "cache_unusable", 0, "the agent's weight cache dir cannot be created, read or written, or --cache-gb is unusable";
    PROGRAM_NOT_FOUND = 10201, "program_not_found", 0, "a workload's program does not exist or is not executable";
    SPAWN_FAILED = 10202, "spawn_failed", 0, "a workload's process could not be spawned";
    PREPARE_FAILED = 10203, "prepare_failed", 0, "a workload's directories, log file or scratch filesystem could not be created";
    DUPLICATE_ALLOCATION = 10204, "duplicate_allocation", 0, "a node was asked to start an allocation it already runs";
    WORKLOAD_UIDS_EXHAUSTED = 10205, "workload_uids_exhausted", 0, "every uid of the node's workload uid range already belongs to another tenant";
    SHIM_FAILED = 10206, "shim_failed", 0, "a workload's shim could not be started or did not report the workload's start";
    WARMING_FAILED = 10207, "warming_failed", 0, "a model version's weights could not be fetched from its source (unreachable, refused, cut, or the cache is full of pinned and in-use copies)";
    WEIGHTS_CORRUPT = 10208, "weights_corrupt", 0, "a fetched or cached copy did not match its registered size or SHA-256; it was deleted and is fetched again";
    WARMING_TIMEOUT = 10209, "warming_timeout", 0, "a task stayed in warming longer than models.warming-timeout-ms; the reason names the source it was reading";
    REPLICA_PORTS_EXHAUSTED = 10210, "replica_ports_exhausted", 0, "every port of the agent's replica-ports range is held by another workload or in use on the host";
    SWAP_REFUSED = 10211, "swap_refused", 0, "a node was asked to swap an allocation that runs no process of that task there (gone, still starting, or a reservation)";
    SWAP_VERIFY_FAILED = 10212, "swap_verify_failed", 0, "a swap's model version could not be fetched or verified in the node's cache; the old process was left serving";
    SWAP_START_FAILED = 10213, "swap_start_failed", 0, "after a swap stopped the old process, the new one could not be started; the workload is reported exited";
    IMAGE_NOT_FOUND = 10220, "image_not_found", 0, "the registry answered that the task's image (or its tag) does not exist; failed at once, not retried";
    IMAGE_UNAUTHORIZED = 10221, "image_unauthorized", 0, "the registry refused to serve the task's image without valid credentials; failed at once, not retried; set the tenant's registry credentials";
    REGISTRY_UNREACHABLE = 10222, "registry_unreachable", 0, "the image's registry could not be reached (connection refused, unknown host, timeouts) or answered with server errors on every try, with backoff, until the prepare timeout";
    IMAGE_DISK_FULL = 10223, "image_disk_full", 0, "the node's disk filled up while pulling the task's image";
    PULL_TIMED_OUT = 10224, "pull_timed_out", 0, "pulling the task's image did not finish within its prepare timeout; the reason says how far it got (layers and bytes done)";
    PULL_FAILED = 10225, "pull_failed", 0, "pulling the task's image failed for another reason podman gave (a malformed reference, a broken manifest, podman missing); the reason quotes it";
    CONTAINER_UNUSABLE = 10230, "container_unusable", 0, "a task that runs in a container was started on a node whose container runtime is down, or its environment or volumes cannot be handed to podman (a variable holding a line break, a path holding ':'); the reason names which";
    PLACEMENT_UNKNOWN_NODE = 10301, "placement_unknown_node", 0, "a placement names a node the pool does not know";
    PLACEMENT_UNKNOWN_GPU = 10302, "placement_unknown_gpu", 0, "a placement names a GPU index its node does not have";
    PLACEMENT_NO_ROOM = 10303, "placement_no_room", 0, "the node no longer has room for the demand (a stale decision)";
    PLACEMENT_MISMATCH = 10304, "placement_mismatch", 0, "a placement does not match its demand (GPU count or amounts)";
    TRACE_IO = 10401, "trace_io", 0, "a trace file cannot be read; the message names the file";
    TRACE_MISSING_COLUMN = 10402, "trace_missing_column", 0, "a trace file lacks a required column";
    TRACE_BAD_FIELD = 10403, "trace_bad_field", 0, "a trace value cannot be parsed; the message names file, line and column";
    // 400: the request is wrong; the field path says where.
    MALFORMED_JSON = 40001, "malformed_json", 400, "the body is not JSON, or it is truncated";
    UNKNOWN_FIELD = 40002, "unknown_field", 400, "a field the schema does not know";
    WRONG_TYPE = 40003, "wrong_type", 400, "a field of the wrong JSON type";
    MISSING_FIELD = 40004, "missing_field", 400, "a required field is absent";
    OUT_OF_RANGE = 40005, "out_of_range", 400, "a value is zero, negative or beyond what any machine offers";
    BAD_FORMAT = 40006, "bad_format", 400, "a value has the wrong shape (a duration that is not HH:MM:SS, a bad id)";
    CONFLICTING_FIELDS = 40007, "conflicting_fields", 400, "two fields contradict each other";
    BAD_QUERY = 40008, "bad_query", 400, "a query parameter is unknown-valued or out of range";
    NOT_WEBSOCKET = 40009, "not_websocket", 400, "the node endpoint was called without a WebSocket upgrade";
    ADDRESS_NOT_ALLOWED = 40020, "address_not_allowed", 400, "an url the control plane would reach on the caller's behalf is not allowed: a loopback, private, link-local or unspecified address (however spelled, or a name resolving to one), a user name or password in it, or plain http:// to a host the operator has not allowed; the field names it";
    MALFORMED_REQUEST = 40030, "malformed_request", 400, "the request could not be parsed as HTTP: a header with a byte HTTP forbids, a Content-Length that is not a number that fits, a request line or path that is not UTF-8 or not percent-encoded, a body whose chunked encoding breaks or that ends before its Content-Length";
    UNAUTHENTICATED = 40100, "unauthenticated", 401, "no bearer token, or one that is not valid";
    PORTAL_LOGIN_REFUSED = 40101, "portal_login_refused", 401, "the token pasted into the portal's login is not a valid operator or tenant token";
    PORTAL_NO_SESSION = 40102, "portal_no_session", 401, "no portal session: never logged in, logged out, expired, or the control plane restarted; log in again";
    FORBIDDEN = 40300, "forbidden", 403, "the token is valid but may not do this";
    PORTAL_CSRF_REFUSED = 40301, "portal_csrf_refused", 403, "a portal form was sent without its session's CSRF token, or with a wrong one; nothing was changed; reload the page and send it again";
    PORTAL_LOGIN_FORM_STALE = 40302, "portal_login_form_stale", 403, "the portal's login form was sent without the cookie its page set (a stale or forged form); reload the login page";
    PORTAL_OPERATOR_ONLY = 40303, "portal_operator_only", 403, "a portal action only the operator may take (cordon, drain), asked by a tenant's session";
    MODEL_NAME_RESERVED = 40330, "model_name_reserved", 403, "a model name in another's namespace: a tenant registers only @TENANT.MODEL names of its own; names without @ are the operator's, shared with every tenant; field name";
    NOT_FOUND = 40400, "not_found", 404, "no such task, tenant, node or path (or the caller may not see it)";
    METHOD_NOT_ALLOWED = 40501, "method_not_allowed", 405, "the path exists but does not answer this method; `Allow` lists those it does";
    REQUEST_TIMEOUT = 40801, "request_timeout", 408, "the request's head or body did not arrive within limits.client-request-timeout-ms";
    CONFLICT = 40901, "conflict", 409, "the request contradicts what exists (a reused task_id, an ended service)";
    NO_LOGS_YET = 40902, "no_logs_yet", 409, "the task has not run yet, so it has no logs";
    SWAP_IN_PROGRESS = 40903, "swap_in_progress", 409, "the service is being swapped to another model version already; wait until that swap is done or rolled back";
    SWAP_NEEDS_REPLICAS = 40904, "swap_needs_replicas", 409, "a 1-replica service cannot be swapped without a gap: scale it to 2 replicas, or ask for max_surge 1 (needs free room for one more replica now) or allow_downtime";
    SWAP_NOT_READY = 40905, "swap_not_ready", 409, "a replica of the service is not running on its allocation yet, so it cannot be swapped in place; retry once every replica runs";
    SWAP_NO_SURGE_ROOM = 40906, "swap_no_surge_room", 409, "max_surge 1 asks for one extra replica of the service's shape on free capacity now, and none holds it: the message says what is missing; free a node's GPUs or add a node, or swap with allow_downtime";
    RETIRE_IN_PROGRESS = 40910, "retire_in_progress", 409, "the version is retiring already with another replace_with (or is retired); the message names it";
    NO_CHECKPOINT = 40911, "no_checkpoint", 409, "the task has reported no checkpoint yet, so no version can be registered from it";
    BODY_TOO_LARGE = 41301, "body_too_large", 413, "the body is larger than the gateway accepts";
    UNSCHEDULABLE = 42201, "unschedulable", 422, "no registered node could ever hold the request; the message names the dimension and the largest offer";
    RESERVED_ID = 42202, "reserved_id", 422, "a task_id ending in `.r` and a number names a replica of a service; choose another id";
    UNKNOWN_MODEL = 42203, "unknown_model", 422, "the task names a model version that is not registered (or the caller may not see it)";
    MODEL_NOT_ACCEPTING = 42204, "model_not_accepting", 422, "the task names a model version that is retiring or retired";
    NOT_A_SERVICE = 42205, "not_a_service", 422, "the task is not an inference service (a training task, or one of a service's replicas), so it has no endpoints";
    EXCEEDS_TENANT_CAP = 42206, "exceeds_tenant_cap", 422, "the request alone is more than its tenant may ever hold (guarantee + borrowing limit in some dimension), so it could never start; the error names the field and the cap";
    REPLACEMENT_INVALID = 42210, "replacement_invalid", 422, "a retire's replace_with names no registered version, the retiring version itself, or one that is deprecated, retiring or retired";
    CHECKPOINT_UNREADABLE = 42211, "checkpoint_unreadable", 422, "the checkpoint to register is not a readable file beside the task's reported checkpoint; the message says why";
    CHECKPOINT_UNTRUSTED = 42212, "checkpoint_untrusted", 422, "the task's checkpoint tree is not one the control plane can tell is the tenant's own: not the agent's `<data-dir>/checkpoints/<task>`, or owned by root or by the control plane's uid (the node gives its workloads no uid of their own); field from_task";
    ORIGIN_NOT_ALLOWED = 42230, "origin_not_allowed", 422, "a model version's weights uri names a scheme, host, address or path its registrant may not use (models.tenant-model-origins, models.operator-model-origins); field weights.uri";
    IMAGE_REQUIRED = 42240, "image_required", 422, "the operator runs every task in a container (limits.require-images): a task without an image (field image) or with runtime process (field runtime) is refused";
    VOLUME_NOT_ALLOWED = 42241, "volume_not_allowed", 422, "a data volume the operator's allow-list (limits.data-volumes) does not offer the task's tenant (field volumes[i].name), or asked read-write where it is offered read-only (field volumes[i].read_write)";
    TOO_MANY_REQUESTS = 42901, "too_many_requests", 429, "this client already has limits.max-requests-per-client requests in flight; retry when one is answered";
    PORTAL_LOGIN_RATE_LIMITED = 42930, "portal_login_rate_limited", 429, "too many portal logins of one principal, or failed logins from one address, within a minute (portal.logins-per-minute); try again after Retry-After seconds";
    HEAD_TOO_LARGE = 43130, "head_too_large", 431, "the request's head is larger than the server reads: more than 128 KiB of request line (path and query string) and headers, or more than 96 headers";
    // 500 / 503: the caller did nothing wrong, the server did.
    INTERNAL = 50000, "internal", 500, "the server failed in a way no other code names; the message says how";
    STORAGE_IO = 50001, "storage_io", 500, "sled failed: I/O, a lock held by another process, a corrupt log";
    STORAGE_CORRUPT_RECORD = 50002, "storage_corrupt_record", 500, "a stored record does not decode";
    STORAGE_ENCODE = 50003, "storage_encode", 500, "a record could not be encoded";
    STORAGE_UNSUPPORTED_FORMAT = 50004, "storage_unsupported_format", 500, "the data directory was written by an incompatible version";
    STORAGE_CONFIG = 50005, "storage_config", 500, "a storage setting is out of range";
    UNAVAILABLE = 50301, "unavailable", 503, "a control-plane actor is not answering; retry";
    NOT_RECORDED = 50302, "not_recorded", 503, "the change could not be recorded in storage; nothing of it was applied; retry";
    PORTAL_SESSIONS_FULL = 50330, "portal_sessions_full", 503, "the portal holds its most sessions and none belongs to the principal logging in, so none is ended for it; log in again when one ends or expires";
}

/// The registered error with `code`, if any.
pub fn by_code(code: u32) -> Option<&'static ErrorCode> {
    ALL.iter().find(|e| e.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_and_names_are_unique() {
        let codes: HashSet<u32> = ALL.iter().map(|e| e.code).collect();
        let names: HashSet<&str> = ALL.iter().map(|e| e.name).collect();
        assert_eq!(codes.len(), ALL.len(), "a code is registered twice");
        assert_eq!(names.len(), ALL.len(), "a name is registered twice");
    }

    #[test]
    fn api_codes_start_with_their_http_status_and_process_codes_have_none() {
        for e in ALL {
            match e.code {
                // 40400 / 100 = 404.
                40000..=59999 => assert_eq!(u32::from(e.http_status), e.code / 100, "{e:?}"),
                10000..=19999 => assert_eq!(e.http_status, 0, "{e:?}"),
                _ => panic!("{e:?} is outside the scheme"),
            }
        }
    }

    #[test]
    fn the_table_is_in_code_order() {
        assert!(ALL.windows(2).all(|w| w[0].code < w[1].code));
        assert_eq!(by_code(40400), Some(&NOT_FOUND));
        assert_eq!(by_code(40401), None);
    }
}
