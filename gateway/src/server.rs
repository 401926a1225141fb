//! Starting and stopping the control plane process.
use crate::state::AppState;
use actix_service::{fn_service, map_config, IntoServiceFactory, ServiceFactoryExt};
use actix_web::dev::AppConfig;
use actix_web::{web, App};
use caldera_actors::config::ServerConfig;
use caldera_actors::control_plane::ControlPlane;
use caldera_spec::codes::{self, ErrorCode};
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;

/// What a started server tells its caller (printed by `caldera server` / `up`).
#[derive(Debug, Clone)]
pub struct Started {
    pub addr: SocketAddr,
    /// Set only on the first start when no operator token was configured: shown once.
    pub generated_operator_token: Option<String>,
    /// Set only on the first start when no join token was configured: shown once.
    pub generated_join_token: Option<String>,
    /// Stops the server gracefully, as SIGTERM does when it listens for
    /// signals itself ([`run`]; `caldera up` uses [`run_without_signals`]).
    pub stop: actix_web::dev::ServerHandle,
}

/// Whether the server stops on SIGINT/SIGTERM itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signals {
    Own,
    /// The caller stops it through [`Started::stop`].
    Caller,
}

/// Why the server could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("storage: {0}")]
    Storage(String),
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

impl GatewayError {
    /// This error's entry in the registry (a process error: never an HTTP answer).
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            GatewayError::Config(_) => &codes::SERVER_CONFIG_INVALID,
            GatewayError::Bind { .. } => &codes::SERVER_BIND_FAILED,
            GatewayError::Storage(_) => &codes::SERVER_STORAGE_FAILED,
            GatewayError::Io(_) => &codes::SERVER_IO_FAILED,
        }
    }

    /// Stable code of the error.
    pub fn code(&self) -> u32 {
        self.error_code().code
    }
}

/// Runs the control plane until SIGINT/SIGTERM. Blocks; builds its own actix System.
/// `on_started` is called once the HTTP listener is bound.
pub fn run(
    config: ServerConfig,
    on_started: impl FnOnce(&Started) + Send + 'static,
) -> Result<(), GatewayError> {
    run_with(config, Signals::Own, on_started)
}

/// [`run`] for a caller that handles the signals: the server runs until
/// [`Started::stop`]. `caldera up` stops its agents first, so they drain
/// (their work moved away as planned stops) while the control plane answers.
pub fn run_without_signals(
    config: ServerConfig,
    on_started: impl FnOnce(&Started) + Send + 'static,
) -> Result<(), GatewayError> {
    run_with(config, Signals::Caller, on_started)
}

/// Validates the config and serves on a System of its own until the
/// signals say stop.
fn run_with(
    config: ServerConfig,
    signals: Signals,
    on_started: impl FnOnce(&Started) + Send + 'static,
) -> Result<(), GatewayError> {
    config
        .validate()
        .map_err(|e| GatewayError::Config(e.to_string()))?;
    let system = actix_web::rt::System::new();
    system.block_on(serve(config, signals, on_started))
}

async fn serve(
    config: ServerConfig,
    signals: Signals,
    on_started: impl FnOnce(&Started),
) -> Result<(), GatewayError> {
    // Bind before booting: a port in use must not leave a fresh data dir with
    // generated tokens that were never shown.
    let listener = std::net::TcpListener::bind(&config.server.listen).map_err(|source| {
        GatewayError::Bind {
            addr: config.server.listen.clone(),
            source,
        }
    })?;
    let booted = caldera_actors::cluster::boot(config.clone())
        .map_err(|e| GatewayError::Storage(e.to_string()))?;
    tracing::info!(live_tasks = booted.tasks_loaded, data_dir = %config.storage.data_dir.display(), "control plane booted");
    let cp = ControlPlane::new(&booted);
    let request_timeout = std::time::Duration::from_millis(config.limits.client_request_timeout_ms);
    let state = web::Data::new(AppState {
        cp: cp.clone(),
        next_session: AtomicU64::new(1),
        body_limit: crate::body::BodyLimit {
            bytes: config.limits.max_body_bytes,
            timeout: request_timeout,
        },
        estimates: Default::default(),
        metrics: crate::metrics::Exposition::new(cp.metrics()),
        endpoint_revisions: Default::default(),
        portal: crate::portal::Portal::new(crate::portal::PortalLimits {
            session_ttl_ms: config.portal.session_ttl_ms,
            sessions_per_principal: config.portal.sessions_per_principal,
            logins_per_minute: config.portal.logins_per_minute,
        }),
    });
    let limit = web::Data::new(crate::client_limit::ClientLimit::new(
        config.limits.max_requests_per_client,
    ));
    let app = move || {
        App::new()
            .app_data(state.clone())
            .app_data(limit.clone())
            .wrap(actix_web::middleware::from_fn(crate::client_limit::cap))
            // Outside the cap: requests it turns away are counted too.
            .wrap(actix_web::middleware::from_fn(
                crate::metrics::http::observe,
            ))
            .wrap(actix_web::middleware::from_fn(crate::error_envelope::wrap))
            // Outermost: every answer, refusals included, gets the headers.
            .wrap(actix_web::middleware::from_fn(crate::security_headers::add))
            .configure(crate::routes::configure)
    };
    let addr = listener.local_addr()?;
    let mut builder = actix_server::Server::build();
    let shutdown = builder.graceful_shutdown_signal();
    builder = builder
        .workers(config.server.http_workers)
        .shutdown_timeout(5);
    if signals == Signals::Caller {
        builder = builder.disable_signals();
    }
    let server = builder
        .listen("caldera-http", listener, move || {
            let shutdown = shutdown.clone();
            let http = actix_http::HttpService::build()
                // Idle keep-alive connections close at once on a stop.
                .graceful_shutdown_signal(move || {
                    let shutdown = shutdown.clone();
                    async move { shutdown.notified().await }
                })
                .keep_alive(std::time::Duration::from_secs(5))
                // A request's head must arrive in time too (its body: `body::read`).
                .client_request_timeout(request_timeout)
                .client_disconnect_timeout(std::time::Duration::from_secs(1))
                .local_addr(addr)
                .h1(map_config(
                    app()
                        .into_factory()
                        .map_err(|e: actix_web::Error| e.error_response()),
                    |_| AppConfig::default(),
                ));
            // Each connection wrapped, so the parser's own refusals carry
            // the envelope too.
            fn_service(|io: tokio::net::TcpStream| {
                let peer = io.peer_addr().ok();
                std::future::ready(Ok::<_, actix_http::error::DispatchError>((
                    crate::parser_errors::Enveloped::new(io),
                    peer,
                )))
            })
            .and_then(http)
        })
        .map_err(|source| GatewayError::Bind {
            addr: config.server.listen.clone(),
            source,
        })?;
    let running = server.run();
    on_started(&Started {
        addr,
        generated_operator_token: booted.generated_operator_token,
        generated_join_token: booted.generated_join_token,
        stop: running.handle(),
    });
    running.await?;
    tracing::info!("control plane stopping; flushing storage");
    cp.flush()
        .map_err(|e| GatewayError::Storage(e.to_string()))?;
    Ok(())
}
