//! Cluster: the root of the control plane. It opens sled, rebuilds every actor
//! from what was recorded (tenants, nodes, the ledger, live tasks), and owns
//! the operations that create actors: submitting a task, creating a tenant,
//! opening a node session.
use crate::commit_site::CommitSite;
use crate::config::ServerConfig;
use crate::durability::{FlushGate, Ticket};
use crate::errors::{ActorError, Result};
use crate::node::NodeActor;
use crate::protocol::cluster::{CreateTenant, NodeSession, RegisterModel, Submit};
use crate::protocol::node::AgentHello;
use crate::protocol::scheduler::SetQuota;
use crate::protocol::{NodeHandle, SchedulerHandle};
use crate::registry::Registry;
use crate::scheduler::Scheduler;
use crate::service::{self, ServiceActor};
use crate::shared::Shared;
use crate::task::TaskActor;
use crate::tenant::TenantActor;
use crate::tokens::{self, Principal, TokenBook};
use actix::prelude::*;
use caldera_spec::wire::PROTOCOL_VERSION;
use caldera_spec::{Event, EventKind, NodeRecord, NodeState, TaskRecord, TaskSpec, TenantRecord};
use caldera_storage::{Store, StoreConfig};
use std::sync::Arc;

const META_OPERATOR: &str = "operator_token_sha256";
const META_JOIN: &str = "join_token_sha256";

/// What booting produced, for the gateway and the startup banner.
pub struct Booted {
    pub cluster: Addr<Cluster>,
    pub shared: Arc<Shared>,
    pub generated_operator_token: Option<String>,
    pub generated_join_token: Option<String>,
    pub tasks_loaded: usize,
}

pub struct Cluster {
    sh: Arc<Shared>,
    next_seq: u64,
}

impl Actor for Cluster {
    type Context = Context<Self>;
}

/// Opens the store and brings every actor back. Must run inside an actix System.
pub fn boot(config: ServerConfig) -> Result<Booted> {
    let store = open_store(&config)?;
    // Before anything reads `t/` or `a/`: every record is keyed tenant/id.
    crate::migrate::scope_task_keys(&store)?;
    // Before the versions' actors start: every tenant's version is named
    // in its namespace, and so is every record that names it.
    crate::migrate::model_names::scope_model_names(&store, crate::clock::now_ms())?;
    let (key, new_key) = crate::token_key::open(&config.storage.data_dir, &store)?;
    let book = Arc::new(TokenBook::new(key.clone()));
    let (gen_op, gen_join) = setup_tokens(&store, &config, &book)?;
    upgrade_digests(&store, &book, new_key.then_some(&key))?;
    let gate = FlushGate::start(store.clone(), crate::metrics::Metrics::default());
    let registry = Arc::new(Registry::default());
    let offers = Arc::new(crate::shared::PoolOffers::default());
    let clock = crate::clock::Clock::start();
    let scheduler = start_scheduler(clock, &gate, &registry, &config, &offers)?;
    let sh = Arc::new(Shared {
        clock,
        gate,
        registry,
        scheduler,
        config,
        tokens: book,
        offers,
        refusals: Default::default(),
        fleet: Default::default(),
        origin_budget: Default::default(),
        images: Default::default(),
        webhook_subscribing: Default::default(),
    });
    restore_tenants(&store, &sh)?;
    restore_nodes(&store, &sh)?;
    let versions = crate::model::register::restore_models(&store, &sh)?;
    let (live, next_seq) = restore_tasks(&store, &sh)?;
    crate::webhook::subscriptions::ensure_idle_subscription(&store, &sh.config, sh.now_ms())?;
    crate::webhook::dispatcher::Dispatcher::start(sh.clone());
    crate::storage_reopen::rebuild_after_reopen(sh.clone());
    sh.record(Event::new(
        sh.now_ms(),
        EventKind::ServerStarted,
        format!("control plane started; {live} live tasks and {versions} model versions rebuilt from storage"),
    ));
    let cluster = Cluster {
        sh: sh.clone(),
        next_seq,
    }
    .start();
    Ok(Booted {
        cluster,
        shared: sh,
        generated_operator_token: gen_op,
        generated_join_token: gen_join,
        tasks_loaded: live,
    })
}

/// The data directory's sled store, created if new. The data dir is the
/// server's alone (0700: the store holds tasks' environments, the key file
/// its token key), narrowed on every boot if it was made wider.
fn open_store(config: &ServerConfig) -> Result<Store> {
    let unusable = |e: std::io::Error| {
        ActorError::Unavailable(format!(
            "cannot create data dir {}: {e}",
            config.storage.data_dir.display()
        ))
    };
    std::fs::create_dir_all(&config.storage.data_dir).map_err(unusable)?;
    caldera_storage::private::narrow_dir(&config.storage.data_dir).map_err(unusable)?;
    Ok(Store::open(
        &config.storage.data_dir.join("sled"),
        &StoreConfig {
            cache_capacity_bytes: config.storage.cache_mb * 1024 * 1024,
            ..Default::default()
        },
    )?)
}

/// The Scheduler, rebuilt from sled, on an arbiter (thread) of its own and
/// supervised: if it ever stops on a fatal error, it is restarted on the same
/// mailbox and rebuilds itself from sled.
fn start_scheduler(
    clock: crate::clock::Clock,
    gate: &Arc<FlushGate>,
    registry: &Arc<Registry>,
    config: &ServerConfig,
    offers: &Arc<crate::shared::PoolOffers>,
) -> Result<SchedulerHandle> {
    let s = Scheduler::load(
        clock,
        gate.clone(),
        registry.clone(),
        config,
        offers.clone(),
    )?;
    let arbiter = actix::Arbiter::new();
    Ok(SchedulerHandle::new(actix::Supervisor::start_in_arbiter(
        &arbiter.handle(),
        move |_| s,
    )))
}

/// One supervised TenantActor per stored tenant; their tokens authenticate again.
fn restore_tenants(store: &Store, sh: &Arc<Shared>) -> Result<()> {
    for t in store.tenants()? {
        sh.tokens
            .insert_hash(t.token_sha256.clone(), Principal::Tenant(t.name.clone()));
        let name = t.name.clone();
        sh.registry
            .add_tenant(&name, TenantActor::spawn(t, sh.clone()));
    }
    Ok(())
}

/// One supervised NodeActor per stored node, given the boot grace before it
/// can be declared lost (its agent needs time to reconnect).
fn restore_nodes(store: &Store, sh: &Arc<Shared>) -> Result<()> {
    let grace = std::time::Duration::from_millis(sh.config.nodes.boot_grace_ms);
    for n in store.nodes()? {
        let name = n.name.clone();
        sh.registry
            .add_node(&name, NodeActor::spawn(n, sh.clone(), grace));
    }
    Ok(())
}

/// Starts the supervised actor that owns `rec` and lists it in the
/// directory: a ServiceActor for an inference service, else a TaskActor.
fn spawn_owner(sh: &Arc<Shared>, rec: TaskRecord, boot: Option<Ticket>) {
    let id = rec.spec.task_id.clone();
    if service::is_service(&rec) {
        let actor = ServiceActor::spawn(rec, sh.clone(), boot);
        sh.registry.add_service(&id, actor);
    } else {
        sh.registry
            .add_task(&id, TaskActor::spawn(rec, sh.clone(), boot));
    }
}

/// One supervised actor per task that is not terminal (a service's or a
/// task's, `spawn_owner`). Answers how many and the next free submission
/// sequence number.
fn restore_tasks(store: &Store, sh: &Arc<Shared>) -> Result<(usize, u64)> {
    let mut next_seq = 0;
    let mut live = 0;
    for t in store.tasks() {
        let t = t?;
        next_seq = next_seq.max(t.seq + 1);
        if !t.state.is_terminal() {
            live += 1;
            spawn_owner(sh, t, None);
        }
    }
    Ok((live, next_seq))
}

/// Configured tokens replace stored hashes; missing ones are generated once.
fn setup_tokens(
    store: &Store,
    config: &ServerConfig,
    book: &TokenBook,
) -> Result<(Option<String>, Option<String>)> {
    let mut generated = (None, None);
    let mut b = store.batch();
    for (key, configured, principal, slot) in [
        (
            META_OPERATOR,
            &config.server.operator_token,
            Principal::Operator,
            0,
        ),
        (META_JOIN, &config.server.join_token, Principal::NodeJoin, 1),
    ] {
        let hash = match (configured, store.meta_get(key)?) {
            (Some(t), _) => book.digest(t),
            (None, Some(h)) => book.upgrade(&String::from_utf8_lossy(&h)),
            (None, None) => {
                let t = tokens::generate().map_err(|e| {
                    ActorError::Unavailable(format!("no randomness for a token: {e}"))
                })?;
                let h = book.digest(&t);
                if slot == 0 {
                    generated.0 = Some(t);
                } else {
                    generated.1 = Some(t);
                }
                h
            }
        };
        b.meta_put(key, hash.as_bytes());
        book.insert_hash(hash, principal);
    }
    store.commit(b)?;
    store.flush()?;
    Ok(generated)
}

/// Stored digests of tenants' tokens and nodes' secrets in their keyed
/// form: plain SHA-256s from a store made before the token key are
/// rewritten once (the booted book already accepts either). With a new
/// key, its fingerprint is stored in the same batch.
fn upgrade_digests(
    store: &Store,
    book: &TokenBook,
    new_key: Option<&tokens::TokenKey>,
) -> Result<()> {
    let mut b = store.batch();
    let mut changed = 0;
    for mut t in store.tenants()? {
        if !tokens::is_keyed(&t.token_sha256) {
            t.token_sha256 = book.upgrade(&t.token_sha256);
            b.put_tenant(&t);
            changed += 1;
        }
    }
    for mut n in store.nodes()? {
        if let Some(h) = n.secret_sha256.as_ref().filter(|h| !tokens::is_keyed(h)) {
            n.secret_sha256 = Some(book.upgrade(h));
            b.put_node(&n);
            changed += 1;
        }
    }
    if let Some(key) = new_key {
        b.meta_put(
            crate::token_key::META_FINGERPRINT,
            key.fingerprint().as_bytes(),
        );
    }
    if changed > 0 || new_key.is_some() {
        store.commit(b)?;
        store.flush()?;
    }
    if changed > 0 {
        tracing::info!(
            "{changed} stored token and node-secret digest(s) now keyed with the token key"
        );
    }
    Ok(())
}

impl Handler<Submit> for Cluster {
    type Result = ResponseFuture<Result<(TaskRecord, bool)>>;
    /// Both answers wait for durability: a new task for its own batch, an
    /// identical resubmission for the latest batch committed (which covers
    /// the original's, still in flight when the duplicate arrives on another
    /// connection) — a 200 must not promise a task that a crash can lose.
    fn handle(&mut self, m: Submit, _: &mut Context<Self>) -> Self::Result {
        let res = self.submit(m);
        let gate = self.sh.gate.clone();
        Box::pin(async move {
            let (rec, created, ticket) = res?;
            gate.settled(ticket)
                .await
                .map_err(|e| ActorError::not_recorded("the submission", e))?;
            Ok((rec, created))
        })
    }
}

impl Cluster {
    /// What every actor is handed (the model registry's handlers use it).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.sh
    }

    /// Answers the record, whether it is new, and the ticket to wait for
    /// before acknowledging it.
    ///
    /// The spec arrives with the tenant's own `task_id`; from here on the
    /// task is known by its key `tenant/task_id` (`caldera_spec::task_key`),
    /// so two tenants' ids never meet. The key is scoped once, here.
    fn submit(&mut self, mut m: Submit) -> Result<(TaskRecord, bool, crate::durability::Ticket)> {
        check_request(&self.sh, &m.tenant, &m.spec)?;
        let own_id = caldera_spec::local_id(&m.spec.task_id).to_string();
        m.spec.task_id = caldera_spec::task_key(&m.tenant, &own_id);
        let id = m.spec.task_id.clone();
        if let Some(why) = self.sh.offers.current().never_fits(&m.spec) {
            if !self.sh.config.scheduling.accept_unschedulable {
                return Err(ActorError::Unschedulable(why));
            }
        }
        if let Some(existing) = self.sh.gate.store().task(&id)? {
            if existing.tenant == m.tenant && existing.spec == m.spec {
                // Readable is not durable: the original's batch is applied but
                // may not be flushed yet. Its ticket is at most the latest.
                return Ok((existing, false, self.sh.gate.latest()));
            }
            // The key holds the tenant, so `existing` is the caller's own
            // task: the message names only the caller's id.
            return Err(ActorError::Conflict(format!(
                "task_id {own_id:?} is already used by a different task of yours; choose another id or resubmit the identical spec"
            )));
        }
        let now = self.sh.now_ms();
        let rec = TaskRecord::new(m.spec, m.tenant.clone(), now, self.next_seq);
        self.next_seq += 1;
        let mut b = self.sh.batch();
        b.put_task(&rec);
        b.append_event(
            Event::new(now, EventKind::TaskSubmitted, describe(&rec.spec))
                .task(&id)
                .tenant(&m.tenant),
        );
        let ticket = self
            .sh
            .gate
            .commit(CommitSite::TaskSubmit, b)
            .map_err(|e| ActorError::not_recorded("the task", e))?;
        spawn_owner(&self.sh, rec.clone(), Some(ticket));
        Ok((rec, true, ticket))
    }
}

/// What a request must pass before anything is decided about it, at
/// submission and in a dry run alike (so both refuse with the same error
/// naming the same field): its tenant exists, it is within what the tenant
/// may ever hold (`tenant_cap`), an inference replica is
/// within the per-replica cap, its model version is one the tenant may
/// use, and it runs the way the operator's container rules allow.
pub(crate) fn check_request(sh: &Shared, tenant: &str, spec: &TaskSpec) -> Result<()> {
    if sh.registry.tenant(tenant).is_none() {
        return Err(ActorError::not_found("tenant", tenant));
    }
    if let Some(rec) = sh.gate.store().tenant(tenant)? {
        if let Some((field, message)) = crate::tenant_cap::beyond_cap(&rec, spec) {
            return Err(ActorError::ExceedsTenantCap { field, message });
        }
    }
    let offers = sh.offers.current();
    check_inference_cap(
        spec,
        sh.config.limits.inference_replica_cap,
        offers.largest_gpu_mb(),
    )?;
    if let Some(model) = &spec.model {
        crate::model::register::check_task_model(sh.gate.store(), tenant, model)?;
    }
    crate::container::admission::check(&sh.config, tenant, spec)
}

/// Inference replicas are small by rule: at most `cap` of one GPU each (by
/// default half of the largest GPU's memory). A service scales out with
/// replicas, not up — so training keeps room and replicas spread.
fn check_inference_cap(spec: &TaskSpec, cap: f64, largest_gpu_mb: u64) -> Result<()> {
    use caldera_spec::{SpecError, SpecErrorKind as K, TaskType};
    if spec.task_type != TaskType::Inference {
        return Ok(());
    }
    let Some(g) = &spec.resources.gpu else {
        return Ok(());
    };
    let refuse = |field: &str, what: String| {
        Err(ActorError::Invalid(SpecError::new(
            K::OutOfRange,
            field,
            format!("{what}: an inference replica may use at most {:.0}% of one GPU; scale out with more replicas instead", cap * 100.0),
        )))
    };
    if g.count > 1 {
        return refuse(
            "resources.gpu.count",
            format!("{} GPUs per replica", g.count),
        );
    }
    match (g.share, g.memory_gb) {
        (Some(s), _) if s > cap + 1e-9 => refuse("resources.gpu.share", format!("a share of {s}")),
        (None, Some(m))
            if largest_gpu_mb > 0 && m * 1024.0 > cap * largest_gpu_mb as f64 + 1e-6 =>
        {
            refuse(
                "resources.gpu.memory_gb",
                format!(
                    "{m} GB per replica (the largest GPU here has {} GB)",
                    largest_gpu_mb / 1024
                ),
            )
        }
        (None, None) => refuse("resources.gpu", "a whole GPU per replica".to_string()),
        _ => Ok(()),
    }
}

fn describe(spec: &TaskSpec) -> String {
    let r = &spec.resources;
    let gpu = match &r.gpu {
        None => "no GPU".to_string(),
        Some(g) => {
            let each = match (g.share, g.memory_gb) {
                (Some(s), _) => format!("{s} of a GPU"),
                (None, Some(m)) => format!("{m} GB each"),
                (None, None) => "whole".to_string(),
            };
            format!(
                "{} x {} GPU ({each})",
                g.count,
                g.model.as_deref().unwrap_or("any")
            )
        }
    };
    format!(
        "{} task submitted, priority {}: {gpu}, {} cores, {} GB memory, {} GB disk",
        spec.task_type.as_str(),
        spec.priority.label(),
        r.cpu.as_ref().map_or(0.0, |c| c.cores),
        r.memory.as_ref().map_or(0.0, |m| m.size_gb),
        r.disk.as_ref().map_or(0.0, |d| d.size_gb),
    )
}

impl Handler<CreateTenant> for Cluster {
    type Result = ResponseFuture<Result<(TenantRecord, String)>>;
    fn handle(&mut self, m: CreateTenant, _: &mut Context<Self>) -> Self::Result {
        let res = self.create_tenant(m);
        let gate = self.sh.gate.clone();
        Box::pin(async move {
            let (rec, token, ticket) = res?;
            gate.durable(ticket).await;
            Ok((rec, token))
        })
    }
}

impl Cluster {
    fn create_tenant(
        &mut self,
        m: CreateTenant,
    ) -> Result<(TenantRecord, String, crate::durability::Ticket)> {
        validate_name(&m.name)?;
        m.quota.validate()?;
        m.borrowing_limit.validate()?;
        if self.sh.registry.tenant(&m.name).is_some() {
            return Err(ActorError::Conflict(format!(
                "tenant {:?} already exists",
                m.name
            )));
        }
        let token = tokens::generate()
            .map_err(|e| ActorError::Unavailable(format!("no randomness for a token: {e}")))?;
        let rec = TenantRecord {
            name: m.name.clone(),
            token_sha256: self.sh.tokens.digest(&token),
            quota: m.quota,
            borrowing_limit: m.borrowing_limit,
            created_ms: self.sh.now_ms(),
        };
        let mut b = self.sh.batch();
        b.put_tenant(&rec);
        b.append_event(
            Event::new(
                self.sh.now_ms(),
                EventKind::TenantCreated,
                format!("tenant {} created", rec.name),
            )
            .tenant(&rec.name),
        );
        let ticket = self
            .sh
            .gate
            .commit(CommitSite::TenantCreate, b)
            .map_err(|e| ActorError::not_recorded("the tenant", e))?;
        self.sh.tokens.insert_hash(
            rec.token_sha256.clone(),
            Principal::Tenant(rec.name.clone()),
        );
        self.sh
            .registry
            .add_tenant(&rec.name, TenantActor::spawn(rec.clone(), self.sh.clone()));
        self.sh.scheduler.do_send(SetQuota {
            tenant: rec.name.clone(),
            limits: crate::tenant::limits(&rec),
        });
        Ok((rec, token, ticket))
    }
}

fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ActorError::Invalid(caldera_spec::SpecError::new(
            caldera_spec::SpecErrorKind::BadFormat,
            "name",
            "a name is 1 to 63 letters, digits, '-' or '_'",
        )))
    }
}

impl Handler<RegisterModel> for Cluster {
    type Result = ResponseFuture<Result<(caldera_spec::ModelVersionRecord, bool)>>;
    /// Versions are immutable: the identical registration again answers the
    /// existing record (200), a different one for the same `name:version`
    /// is a 409. Both answers wait for durability, like a submission.
    fn handle(&mut self, m: RegisterModel, _: &mut Context<Self>) -> Self::Result {
        let sh = self.shared().clone();
        let res = crate::model::register::register(&sh, m);
        Box::pin(async move {
            let (rec, created, ticket) = res?;
            sh.gate.durable(ticket).await;
            Ok((rec, created))
        })
    }
}

impl Handler<NodeSession> for Cluster {
    type Result = Result<NodeHandle>;
    fn handle(&mut self, m: NodeSession, _: &mut Context<Self>) -> Self::Result {
        if m.hello.protocol != PROTOCOL_VERSION {
            return Err(ActorError::Conflict(format!(
                "protocol {} is not supported (this server speaks {PROTOCOL_VERSION})",
                m.hello.protocol
            )));
        }
        validate_name(&m.hello.node_name).map_err(|_| {
            ActorError::Conflict(format!("node name {:?} is not valid", m.hello.node_name))
        })?;
        m.hello.inventory.validate()?;
        let name = m.hello.node_name.clone();
        let addr = match self.sh.registry.node(&name) {
            Some(a) => a,
            None => {
                let now = self.sh.now_ms();
                let rec = NodeRecord {
                    name: name.clone(),
                    inventory: m.hello.inventory.clone(),
                    epoch: 0,
                    state: NodeState::Ready,
                    joined_ms: now,
                    last_seen_ms: now,
                    secret_sha256: None,
                    revoked: false,
                    cordon: None,
                };
                let a = NodeActor::spawn(rec, self.sh.clone(), std::time::Duration::ZERO);
                self.sh.registry.add_node(&name, a.clone());
                a
            }
        };
        addr.do_send(AgentHello {
            hello: m.hello,
            session_id: m.session_id,
            tx: m.tx,
        });
        Ok(addr)
    }
}

/// Reads that need no actor: they go straight to sled.
pub fn store(sh: &Shared) -> &Store {
    sh.gate.store()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> TaskSpec {
        caldera_spec::parse_task_spec(json.as_bytes()).unwrap()
    }

    fn inference(gpu: &str) -> TaskSpec {
        spec(&format!(
            r#"{{"task_id":"svc","task_type":"inference","resources":{{"gpu":{gpu}}}}}"#
        ))
    }

    /// Cap 0.5 of one GPU; the largest GPU has 81,920 MiB (80 GB), so the
    /// memory limit is 0.5 x 81,920 = 40,960 MiB = 40 GB.
    #[test]
    fn inference_replicas_are_capped_at_half_a_gpu() {
        let rows: &[(&str, Option<&str>, &str)] = &[
            (r#"{"count":1,"share":0.5}"#, None, "0.5 <= 0.5"),
            (
                r#"{"count":1,"share":0.6}"#,
                Some("resources.gpu.share"),
                "0.6 > 0.5",
            ),
            (
                r#"{"count":1,"memory_gb":40}"#,
                None,
                "40 x 1024 = 40,960 <= 40,960",
            ),
            (
                r#"{"count":1,"memory_gb":41}"#,
                Some("resources.gpu.memory_gb"),
                "41,984 > 40,960",
            ),
            (
                r#"{"count":2,"memory_gb":10}"#,
                Some("resources.gpu.count"),
                "2 GPUs per replica",
            ),
            (r#"{"count":1}"#, Some("resources.gpu"), "a whole GPU"),
        ];
        for (gpu, field, why) in rows {
            let got = check_inference_cap(&inference(gpu), 0.5, 81_920);
            assert_eq!(
                got.as_ref().err().and_then(|e| e.field()),
                *field,
                "{gpu}: {why}"
            );
        }
        // Training is never capped; without nodes (largest 0) memory is not judged.
        let training = spec(
            r#"{"task_id":"t","task_type":"training","resources":{"gpu":{"count":8,"memory_gb":80}}}"#,
        );
        assert!(check_inference_cap(&training, 0.5, 81_920).is_ok());
        assert!(check_inference_cap(&inference(r#"{"count":1,"memory_gb":79}"#), 0.5, 0).is_ok());
    }

    #[test]
    fn names_are_1_to_63_letters_digits_dashes_or_underscores() {
        for ok in ["a", "team-a_1", &"x".repeat(63)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "ä", &"x".repeat(64)] {
            let e = validate_name(bad).unwrap_err();
            assert_eq!(e.field(), Some("name"), "{bad}");
        }
    }

    #[test]
    fn the_submitted_event_says_what_was_asked() {
        let s = spec(
            r#"{"task_id":"t","task_type":"training","priority":"high","resources":{"gpu":{"count":4,"memory_gb":80,"model":"A100"},"cpu":{"cores":32},"memory":{"size_gb":256},"disk":{"size_gb":200}}}"#,
        );
        assert_eq!(
            describe(&s),
            "training task submitted, priority high: 4 x A100 GPU (80 GB each), 32 cores, 256 GB memory, 200 GB disk"
        );
    }
}
