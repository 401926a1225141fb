//! `caldera up`: the embedded default. One command runs the control plane in
//! this process, node agents as child processes, creates the demo tenant and
//! prints everything needed to submit a first task.
mod agents;
mod dirs;
mod profiles;
mod runtimes;
mod tokens;

use super::client::{block_on, ApiClient, Verb};
use super::server_config::{self, FlagOverrides};
use super::{logging, CliError};
use caldera_actors::config::ServerConfig;
use caldera_gateway::{GatewayError, Started};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{oneshot, watch};

/// Name of the tenant `up` creates for trying things out.
const DEMO_TENANT: &str = "demo";
/// How long `up` waits for the fresh server to answer /healthz.
const READY_WAIT: Duration = Duration::from_secs(15);
/// How long the control plane gets to stop after the agents are down.
const SERVER_STOP_WAIT: Duration = Duration::from_secs(15);
/// The seed's example request, shown in the hint.
const SEED_EXAMPLE: &str = r#"{"task_id":"train_20240716_001","task_type":"training","priority":"high","resources":{"gpu":{"count":4,"memory_gb":80,"model":"A100"},"cpu":{"cores":32},"memory":{"size_gb":256},"disk":{"size_gb":200}},"duration":"01:00:00","image":"registry.internal/deeplearning/pytorch:2.1-cu12.1"}"#;

/// Flags of `caldera up`.
#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Address of the HTTP gateway (the REST API, the node WebSocket, /metrics).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    pub listen: String,
    /// Everything `up` keeps: the control plane (server/), the agents
    /// (nodes/), their logs (logs/) and the tokens (up-tokens.json).
    #[arg(long, value_name = "DIR", default_value = "./caldera-data")]
    pub data_dir: PathBuf,
    /// Number of local node agents.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub nodes: u32,
}

/// Runs the embedded default until SIGINT/SIGTERM.
pub fn run(args: UpArgs) -> Result<(), CliError> {
    dirs::prepare(&args.data_dir)
        .map_err(|e| CliError::Failed(format!("creating {}: {e}", args.data_dir.display())))?;
    let flags = FlagOverrides {
        listen: Some(args.listen.clone()),
        data_dir: Some(args.data_dir.join("server")),
    };
    let loaded = server_config::load(None, std::env::vars(), &flags)?;
    let mut config = loaded.config.clone();
    let tokens = tokens::load_or_create(
        &args.data_dir,
        config.server.operator_token.take(),
        config.server.join_token.take(),
    )?;
    config.server.operator_token = Some(tokens.operator_token.clone());
    config.server.join_token = Some(tokens.join_token.clone());
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Failed(format!("cannot find this program's path: {e}")))?;
    logging::init();
    loaded.warn_deprecations();
    block_on(embedded(config, tokens, exe, args))
}

/// The control plane on its own thread (it builds its own actix System), the
/// agents and the signal handling on this one.
async fn embedded(
    config: ServerConfig,
    mut tokens: tokens::UpTokens,
    exe: PathBuf,
    args: UpArgs,
) -> Result<(), CliError> {
    // Listen before the server starts so an early Ctrl-C is not lost.
    let mut shutdown = Shutdown::listen()?;
    let (mut started_rx, mut server_done) = start_control_plane(config)?;
    let started = tokio::select! {
        started = &mut started_rx => match started {
            Ok(started) => started,
            Err(_) => return server_outcome(server_done.await),
        },
        _ = shutdown.requested() => {
            // No agent runs yet: stop the server as soon as it has started.
            if let Ok(started) = started_rx.await {
                started.stop.stop(true).await;
            }
            return wait_for_server(server_done).await;
        }
    };
    let url = format!("http://{}", started.addr);
    let (stop_tx, stop_rx) = watch::channel(false);
    let plans = profiles::agent_plans(
        args.nodes,
        &url,
        &tokens.join_token,
        &args.data_dir,
        profiles::real_gpus_present(),
    );
    let supervisors: Vec<_> = plans
        .into_iter()
        .map(|plan| {
            let log = args
                .data_dir
                .join("logs")
                .join(format!("{}.log", plan.name));
            actix_rt::spawn(agents::supervise(exe.clone(), plan, log, stop_rx.clone()))
        })
        .collect();
    let demo = ensure_demo_tenant(&url, &mut tokens, &args.data_dir).await;
    print_banner(&url, &tokens, demo);
    // Said once the agents have joined, without holding up Ctrl-C.
    let (report_url, report_token, expected) =
        (url.clone(), tokens.operator_token.clone(), args.nodes);
    actix_rt::spawn(async move { runtimes::report(&report_url, &report_token, expected).await });

    let ended_early = tokio::select! {
        _ = shutdown.requested() => None,
        outcome = &mut server_done => Some(outcome),
    };
    // The agents first, while the control plane still answers: each drains
    // its node (training checkpoints and is requeued, reservations and
    // service replicas are requeued, no retry spent), so the next `up`
    // resumes everything. All stop together, so nothing is moved between them.
    tracing::info!("stopping the node agents (each drains its node first)");
    let _ = stop_tx.send(true);
    for supervisor in supervisors {
        let _ = supervisor.await;
    }
    if ended_early.is_none() {
        tracing::info!("stopping the control plane");
        started.stop.stop(true).await;
    }
    match ended_early {
        Some(outcome) => match server_outcome(outcome) {
            Ok(()) => Err(CliError::Failed(
                "the control plane stopped on its own".into(),
            )),
            Err(e) => Err(e),
        },
        None => wait_for_server(server_done).await,
    }
}

/// What `caldera_gateway::run` returned, as seen from this thread.
type ServerDone = oneshot::Receiver<Result<(), GatewayError>>;
type ServerOutcome = Result<Result<(), GatewayError>, oneshot::error::RecvError>;

/// Starts `caldera_gateway::run` on a thread. The first receiver fires once
/// the listener is bound; the second when `run` returns.
fn start_control_plane(
    config: ServerConfig,
) -> Result<(oneshot::Receiver<Started>, ServerDone), CliError> {
    let (started_tx, started_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("control-plane".into())
        .spawn(move || {
            // `up` handles the signals: the agents stop (drain) before the server.
            let outcome = caldera_gateway::run_without_signals(config, move |started| {
                let _ = started_tx.send(started.clone());
            });
            let _ = done_tx.send(outcome);
        })
        .map_err(|e| CliError::Failed(format!("cannot start the control plane thread: {e}")))?;
    Ok((started_rx, done_rx))
}

fn server_outcome(outcome: ServerOutcome) -> Result<(), CliError> {
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(CliError::Failed(format!("control plane: {e}"))),
        Err(_) => Err(CliError::Failed(
            "the control plane thread ended without a result".into(),
        )),
    }
}

/// Waits for the control plane, asked to stop, to flush and return.
async fn wait_for_server(
    done: oneshot::Receiver<Result<(), GatewayError>>,
) -> Result<(), CliError> {
    match tokio::time::timeout(SERVER_STOP_WAIT, done).await {
        Ok(outcome) => server_outcome(outcome),
        Err(_) => Err(CliError::Failed("the control plane did not stop".into())),
    }
}

/// SIGINT or SIGTERM, whichever comes first.
struct Shutdown {
    interrupt: Signal,
    terminate: Signal,
}

impl Shutdown {
    fn listen() -> Result<Self, CliError> {
        let hook = |kind| {
            signal(kind).map_err(|e| CliError::Failed(format!("cannot listen for signals: {e}")))
        };
        Ok(Shutdown {
            interrupt: hook(SignalKind::interrupt())?,
            terminate: hook(SignalKind::terminate())?,
        })
    }

    async fn requested(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// What became of the demo tenant's token.
enum DemoToken {
    Known,
    Missing(String),
}

/// Creates the demo tenant on the first run and saves its token; later runs
/// reuse the saved one. A failure is reported, not fatal: the cluster still
/// works with the operator token.
async fn ensure_demo_tenant(
    url: &str,
    tokens: &mut tokens::UpTokens,
    data_dir: &Path,
) -> DemoToken {
    if tokens.demo_tenant_token.is_some() {
        return DemoToken::Known;
    }
    let client = ApiClient::new(url, Some(tokens.operator_token.clone()));
    if let Err(e) = wait_until_ready(&client).await {
        return DemoToken::Missing(e.to_string());
    }
    let body = serde_json::json!({ "name": DEMO_TENANT });
    let created = match client.send_json(Verb::Post, "/v1/tenants", &body).await {
        Ok(answer) => answer.data,
        Err(e) => return DemoToken::Missing(format!("creating the demo tenant: {e}")),
    };
    let Some(token) = created.get("token").and_then(serde_json::Value::as_str) else {
        return DemoToken::Missing("the server did not return the demo tenant's token".into());
    };
    tokens.demo_tenant_token = Some(token.to_string());
    match tokens::save(data_dir, tokens) {
        Ok(()) => DemoToken::Known,
        Err(e) => DemoToken::Missing(format!("the demo tenant token could not be saved: {e}")),
    }
}

/// Polls /healthz until the server answers, for up to [`READY_WAIT`].
async fn wait_until_ready(client: &ApiClient) -> Result<(), CliError> {
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    loop {
        match client.get("/healthz", &[]).await {
            Ok(_) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(CliError::Failed(format!(
                    "the server did not become ready: {e}"
                )))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The lines a person needs: address, tokens (one line each, so scripts can
/// pick them with `grep`) and how to submit the seed's example.
fn print_banner(url: &str, tokens: &tokens::UpTokens, demo: DemoToken) {
    let demo_token = match (&tokens.demo_tenant_token, demo) {
        (Some(token), DemoToken::Known) => token.clone(),
        (_, DemoToken::Missing(why)) => {
            tracing::warn!("demo tenant: {why}");
            format!("(unavailable: {why})")
        }
        (None, DemoToken::Known) => "(unavailable)".into(),
    };
    print!("{}", banner(url, tokens, &demo_token));
    match save_contexts(url, tokens) {
        Ok(path) => println!(
            "CLI contexts saved in {}: `up` (the demo tenant, current) and `up-operator`: \
             try `caldera tasks`, `caldera nodes --context up-operator`",
            path.display()
        ),
        Err(e) => tracing::warn!("the CLI contexts were not saved: {e}"),
    }
}

/// Saves this cluster as the CLI's contexts `up` (the demo tenant, made
/// current) and `up-operator`, so the CLI works right after `up` without
/// flags. A context file of other clusters keeps them.
fn save_contexts(url: &str, tokens: &tokens::UpTokens) -> Result<std::path::PathBuf, CliError> {
    use super::context::{path, Context, Contexts};
    let path = path().ok_or_else(|| CliError::Failed("no HOME or XDG_CONFIG_HOME".into()))?;
    let mut saved = Contexts::load(&path)?;
    saved.set(
        "up-operator",
        Context {
            server: url.to_string(),
            token: Some(tokens.operator_token.clone()),
        },
    );
    if let Some(demo) = &tokens.demo_tenant_token {
        saved.set(
            "up",
            Context {
                server: url.to_string(),
                token: Some(demo.clone()),
            },
        );
    }
    saved.save(&path)?;
    Ok(path)
}

/// The text of [`print_banner`], one fact per line.
fn banner(url: &str, tokens: &tokens::UpTokens, demo_token: &str) -> String {
    let operator = &tokens.operator_token;
    let join = &tokens.join_token;
    format!(
        "Caldera is up: {url}\n\
         operator token: {operator}\n\
         demo tenant token: {demo_token}\n\
         join token: {join}\n\
         Submit the seed's example as the demo tenant, with curl or with the CLI:\n  \
         curl -sS -X POST {url}/v1/tasks -H 'Authorization: Bearer {demo_token}' \
         -H 'Content-Type: application/json' -d '{SEED_EXAMPLE}'\n  \
         echo '{SEED_EXAMPLE}' | caldera submit - --server {url} --token {demo_token}\n\
         Or open the portal, {url}/ in a browser, and log in by pasting one of the tokens above.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_gives_each_token_its_own_line_and_a_hint_that_uses_them() {
        let tokens = tokens::UpTokens {
            operator_token: "op".into(),
            join_token: "jt".into(),
            demo_tenant_token: Some("dt".into()),
        };
        let text = banner("http://127.0.0.1:7070", &tokens, "dt");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8);
        assert!(lines[7].contains("http://127.0.0.1:7070/"), "{}", lines[7]);
        assert_eq!(
            lines[..4],
            [
                "Caldera is up: http://127.0.0.1:7070",
                "operator token: op",
                "demo tenant token: dt",
                "join token: jt"
            ]
        );
        assert!(lines[5].starts_with(
            "  curl -sS -X POST http://127.0.0.1:7070/v1/tasks -H 'Authorization: Bearer dt' "
        ));
        assert!(lines[5].ends_with("-d '{\"task_id\":\"train_20240716_001\",\"task_type\":\"training\",\"priority\":\"high\",\"resources\":{\"gpu\":{\"count\":4,\"memory_gb\":80,\"model\":\"A100\"},\"cpu\":{\"cores\":32},\"memory\":{\"size_gb\":256},\"disk\":{\"size_gb\":200}},\"duration\":\"01:00:00\",\"image\":\"registry.internal/deeplearning/pytorch:2.1-cu12.1\"}'"));
        assert!(lines[6].ends_with("| caldera submit - --server http://127.0.0.1:7070 --token dt"));
    }

    #[test]
    fn the_seed_example_is_valid_json() {
        let spec: serde_json::Value =
            serde_json::from_str(SEED_EXAMPLE).expect("seed example parses");
        assert_eq!(spec["resources"]["gpu"]["count"], 4);
    }
}
