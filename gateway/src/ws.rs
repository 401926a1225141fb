//! The node agents' WebSocket: `GET /v1/nodes/connect` with the join token.
//! The first frame must be a hello; after it, frames go to the node's actor and
//! commands come back through a channel the actor holds.
use crate::error::ApiError;
use crate::principal::NodeJoin;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{AggregatedMessage, Session};
use caldera_spec::codes;
use caldera_spec::wire::{NodeMessage, ServerMessage};
use futures_util::StreamExt;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;

/// A hello must arrive this soon after the upgrade.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest frame accepted from an agent (a hello with many workloads).
const MAX_FRAME: usize = 4 * 1024 * 1024;

/// Why a node's session ended other than by a close: logged with the session id.
#[derive(Debug, thiserror::Error)]
enum SessionEnded {
    #[error("no hello in time")]
    NoHello,
    /// The hello was refused; the agent was told `reason`.
    #[error("{reason}")]
    Refused { reason: String },
    #[error("{0}")]
    Encode(serde_json::Error),
    #[error("agent socket closed")]
    SocketClosed,
    /// The actor dropped the sender: session superseded or node fenced.
    #[error("session closed by the control plane")]
    ClosedByControlPlane,
    #[error("protocol error: {0}")]
    Protocol(actix_ws::ProtocolError),
}

#[utoipa::path(get, path = "/v1/nodes/connect", tag = "nodes",
    description = "The node agents' WebSocket (join token). The first text frame is a hello; the frames are the wire messages of caldera-spec's `wire` module, outside this document.",
    security(("join" = [])),
    responses(
        (status = 101, description = "switched to the WebSocket protocol"),
        (status = 400, description = "not a WebSocket upgrade"),
    ))]
pub async fn connect(
    _: NodeJoin,
    req: HttpRequest,
    st: web::Data<AppState>,
    body: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (resp, session, stream) = actix_ws::handle(&req, body).map_err(|e| {
        ApiError::new(
            &codes::NOT_WEBSOCKET,
            format!("expected a WebSocket upgrade: {e}"),
        )
    })?;
    let stream = stream
        .max_frame_size(MAX_FRAME)
        .aggregate_continuations()
        .max_continuation_size(MAX_FRAME);
    let session_id = st.next_session.fetch_add(1, Ordering::Relaxed);
    let st = st.into_inner();
    // The node's replicas are listed at the host the agent advertises, else
    // at the address its connection comes from.
    let peer_host = req.peer_addr().map(|a| a.ip().to_string());
    actix_web::rt::spawn(async move {
        if let Err(why) = run_session(st, session, stream, session_id, peer_host).await {
            tracing::info!(session_id, %why, "node session ended");
        }
    });
    Ok(resp)
}

async fn run_session(
    st: std::sync::Arc<AppState>,
    mut session: Session,
    mut stream: actix_ws::AggregatedMessageStream,
    session_id: u64,
    peer_host: Option<String>,
) -> Result<(), SessionEnded> {
    let (tx, mut rx) = mpsc::unbounded_channel::<ServerMessage>();
    // 1. hello
    let first = tokio::time::timeout(HELLO_TIMEOUT, stream.next())
        .await
        .map_err(|_| SessionEnded::NoHello)?;
    let hello = match first {
        Some(Ok(AggregatedMessage::Text(t))) => match serde_json::from_str::<NodeMessage>(&t) {
            Ok(NodeMessage::Hello(h)) => h,
            Ok(_) => return refuse(session, "the first frame must be a hello", 0).await,
            Err(e) => return refuse(session, &format!("bad hello: {e}"), 0).await,
        },
        _ => return refuse(session, "the first frame must be a text hello", 0).await,
    };
    let mut hello = hello;
    if hello.advertise_host.is_none() {
        hello.advertise_host = peer_host;
    }
    let node_name = hello.node_name.clone();
    let node = match st.cp.open_node_session(hello, session_id, tx).await {
        Ok(link) => link,
        Err(e) => return refuse(session, &e.to_string(), e.code()).await,
    };
    tracing::info!(node = %node_name, session_id, "node session open");
    // 2. frames both ways until either side ends
    let result = loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(m) => {
                    let text = serde_json::to_string(&m).map_err(SessionEnded::Encode)?;
                    if session.text(text).await.is_err() {
                        break Err(SessionEnded::SocketClosed);
                    }
                }
                // The actor dropped the sender: session superseded or node fenced.
                None => break Err(SessionEnded::ClosedByControlPlane),
            },
            inp = stream.next() => match inp {
                Some(Ok(AggregatedMessage::Text(t))) => match serde_json::from_str::<NodeMessage>(&t) {
                    Ok(msg) => node.forward(msg),
                    Err(e) => tracing::warn!(node = %node_name, error = %e, "unreadable frame from agent ignored"),
                },
                Some(Ok(AggregatedMessage::Ping(p))) => {
                    if session.pong(&p).await.is_err() {
                        break Err(SessionEnded::SocketClosed);
                    }
                }
                Some(Ok(AggregatedMessage::Close(_))) | None => break Ok(()),
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(SessionEnded::Protocol(e)),
            },
        }
    };
    node.close();
    let _ = session.close(None).await;
    result
}

/// Answers a hello that cannot open a session (`code`: the registry entry, 0 when none fits).
async fn refuse(mut session: Session, reason: &str, code: u32) -> Result<(), SessionEnded> {
    let m = ServerMessage::Refused {
        reason: reason.to_string(),
        code,
    };
    if let Ok(t) = serde_json::to_string(&m) {
        let _ = session.text(t).await;
    }
    let _ = session.close(None).await;
    Err(SessionEnded::Refused {
        reason: reason.to_string(),
    })
}
