//! The WebSocket session with the control plane, as one long-lived task: connect
//! (bearer = join token), pump JSON text frames both ways, detect a dead server,
//! reconnect forever with backoff. It knows the protocol only as far as
//! liveness needs (a welcome arrived; a refusal ends the connection); what
//! to say is decided by the agent loop, which gets [`SessionEvent`]s.
pub mod backoff;
pub mod numbering;

use backoff::Backoff;
use caldera_spec::wire::{NodeMessage, ServerMessage};
use futures_util::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

/// Largest frame accepted from the control plane.
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// What the session tells the agent loop. `generation` numbers connections, so
/// a message of an old connection is never taken for one of the new.
/// Messages arrive at heartbeat rates, so a boxed variant would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum SessionEvent {
    /// A connection is up; send the hello (and everything after) on `outbound`.
    Connected {
        generation: u64,
        outbound: UnboundedSender<NodeMessage>,
    },
    /// A message from the control plane.
    Message {
        generation: u64,
        message: ServerMessage,
    },
    /// The connection ended; the session is reconnecting.
    Disconnected { generation: u64, reason: String },
}

/// Where and how to connect.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Full WebSocket URL (`.../v1/nodes/connect`).
    pub url: String,
    pub token: String,
    /// WebSocket ping period. Once the server has answered a ping, silence for
    /// three periods ends the connection (a dead or partitioned server).
    pub ping_interval: Duration,
    /// A connection without a welcome after this long is dropped.
    pub welcome_timeout: Duration,
    /// Connect (TCP + upgrade) timeout.
    pub connect_timeout: Duration,
}

/// Runs the session until `shutdown` turns true. Must run on the agent's
/// actix/tokio local set (awc futures are not `Send`).
pub async fn run(
    config: SessionConfig,
    events: UnboundedSender<SessionEvent>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::standard();
    let mut generation = 0u64;
    let mut failures = 0u32;
    loop {
        if *shutdown.borrow() {
            return;
        }
        match connect(&config).await {
            Err(e) => {
                failures += 1;
                // The first failure in a row is worth a warning; the retries are not.
                if failures == 1 {
                    tracing::warn!(
                        "cannot connect to {}: {e}; retrying with backoff",
                        config.url
                    );
                } else {
                    tracing::debug!("connect attempt {failures} to {} failed: {e}", config.url);
                }
            }
            Ok(framed) => {
                failures = 0;
                generation += 1;
                tracing::info!("connected to {}", config.url);
                let (end, welcomed) =
                    serve(&config, framed, &events, generation, &mut shutdown).await;
                if end.shutdown {
                    return;
                }
                if welcomed {
                    backoff.reset();
                }
            }
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Runs one connection: announces it to the agent, pumps it, reports its end.
/// Returns how it ended and whether it was welcomed.
async fn serve(
    config: &SessionConfig,
    framed: Framed,
    events: &UnboundedSender<SessionEvent>,
    generation: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> (End, bool) {
    let (outbound, rx) = unbounded_channel();
    let connected = SessionEvent::Connected {
        generation,
        outbound,
    };
    if events.send(connected).is_err() {
        let gone = End {
            reason: "agent gone".into(),
            shutdown: true,
        };
        return (gone, false);
    }
    let mut live = Liveness::new();
    let end = pump(config, framed, rx, events, generation, shutdown, &mut live).await;
    tracing::warn!("session {generation} ended: {}", end.reason);
    let _ = events.send(SessionEvent::Disconnected {
        generation,
        reason: end.reason.clone(),
    });
    (end, live.welcomed)
}

type Framed = actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>;

/// Why the agent could not reach its control plane, or lost a frame on the way.
#[derive(Debug, thiserror::Error)]
enum Wire {
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    #[error("{0}")]
    Send(#[from] awc::error::WsProtocolError),
}

async fn connect(config: &SessionConfig) -> Result<Framed, Wire> {
    let client = awc::Client::builder()
        .timeout(config.connect_timeout)
        .finish();
    let (_response, framed) = client
        .ws(config.url.as_str())
        .bearer_auth(&config.token)
        .max_frame_size(MAX_FRAME_BYTES)
        .connect()
        .await
        .map_err(|e| Wire::Connect(e.to_string()))?;
    Ok(framed)
}

/// How a connection ended.
struct End {
    reason: String,
    /// The agent is going away: do not reconnect.
    shutdown: bool,
}

impl End {
    fn lost(reason: impl Into<String>) -> Option<End> {
        Some(End {
            reason: reason.into(),
            shutdown: false,
        })
    }
}

/// What one connection has learned about its server.
struct Liveness {
    connected_at: Instant,
    last_heard: Instant,
    /// The server answers pings, so their absence means it is gone.
    pong_seen: bool,
    welcomed: bool,
    /// The agent's first frame (the hello) went out; only then may pings follow.
    said_hello: bool,
}

impl Liveness {
    fn new() -> Self {
        Liveness {
            connected_at: Instant::now(),
            last_heard: Instant::now(),
            pong_seen: false,
            welcomed: false,
            said_hello: false,
        }
    }
}

/// Moves frames both ways until the connection ends; says why.
async fn pump(
    config: &SessionConfig,
    mut framed: Framed,
    mut outbound: UnboundedReceiver<NodeMessage>,
    events: &UnboundedSender<SessionEvent>,
    generation: u64,
    shutdown: &mut watch::Receiver<bool>,
    live: &mut Liveness,
) -> End {
    // The first ping waits a period: the hello must be the first frame the server sees.
    let first_ping = tokio::time::Instant::now() + config.ping_interval;
    let mut ping = tokio::time::interval_at(first_ping, config.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ended = tokio::select! {
            _ = shutdown.changed() => {
                // Deliver what the agent queued before it asked us to stop.
                while let Ok(msg) = outbound.try_recv() {
                    if send_json(&mut framed, &msg).await.is_err() {
                        break;
                    }
                }
                close_gracefully(&mut framed).await;
                Some(End { reason: "agent shutting down".into(), shutdown: true })
            }
            out = outbound.recv() => match out {
                Some(msg) => match send_json(&mut framed, &msg).await {
                    Ok(()) => {
                        live.said_hello = true;
                        None
                    }
                    Err(e) => End::lost(format!("send failed: {e}")),
                },
                None => End::lost("agent dropped the session"),
            },
            frame = framed.next() => on_frame(frame, &mut framed, events, generation, live).await,
            _ = ping.tick() => on_ping_tick(config, &mut framed, live).await,
        };
        if let Some(end) = ended {
            return end;
        }
    }
}

type FrameResult = Option<Result<awc::ws::Frame, awc::error::WsProtocolError>>;

/// Handles one frame from the server: messages go to the agent, pings are
/// answered, pongs and any traffic count as signs of life.
async fn on_frame(
    frame: FrameResult,
    framed: &mut Framed,
    events: &UnboundedSender<SessionEvent>,
    generation: u64,
    live: &mut Liveness,
) -> Option<End> {
    use awc::ws::{Frame, Message};
    let frame = match frame {
        None => return End::lost("server closed the connection"),
        Some(Err(e)) => return End::lost(format!("protocol error: {e}")),
        Some(Ok(frame)) => frame,
    };
    live.last_heard = Instant::now();
    match frame {
        Frame::Text(bytes) => {
            let message = match serde_json::from_slice::<ServerMessage>(&bytes) {
                Ok(message) => message,
                Err(e) => {
                    let preview: String =
                        String::from_utf8_lossy(&bytes).chars().take(200).collect();
                    tracing::warn!(
                        "ignoring an unreadable message from the control plane ({e}): {preview}"
                    );
                    return None;
                }
            };
            live.welcomed |= matches!(message, ServerMessage::Welcome(_));
            let refused = matches!(message, ServerMessage::Refused { .. });
            if events
                .send(SessionEvent::Message {
                    generation,
                    message,
                })
                .is_err()
            {
                return Some(End {
                    reason: "agent gone".into(),
                    shutdown: true,
                });
            }
            if refused {
                close_gracefully(framed).await;
                return End::lost("control plane refused the hello");
            }
            None
        }
        Frame::Ping(payload) => match framed.send(Message::Pong(payload)).await {
            Ok(()) => None,
            Err(e) => End::lost(format!("send failed: {e}")),
        },
        Frame::Pong(_) => {
            live.pong_seen = true;
            None
        }
        Frame::Close(reason) => End::lost(format!("server closed the session ({reason:?})")),
        Frame::Binary(_) | Frame::Continuation(_) => {
            tracing::warn!("ignoring a binary/fragmented frame from the control plane");
            None
        }
    }
}

/// Each ping period: give up on a server that never welcomed us or went
/// silent, else ping it.
async fn on_ping_tick(config: &SessionConfig, framed: &mut Framed, live: &Liveness) -> Option<End> {
    if !live.welcomed && live.connected_at.elapsed() > config.welcome_timeout {
        return End::lost(format!("no welcome within {:?}", config.welcome_timeout));
    }
    // Only a server that has shown it answers pings can be judged by their absence.
    let silent = live.last_heard.elapsed();
    if live.pong_seen && silent > config.ping_interval * 3 {
        return End::lost(format!("server silent for {silent:?}"));
    }
    if !live.said_hello {
        return None;
    }
    match framed
        .send(awc::ws::Message::Ping(Default::default()))
        .await
    {
        Ok(()) => None,
        Err(e) => End::lost(format!("send failed: {e}")),
    }
}

/// The WebSocket closing handshake: send Close, then read until the server's
/// Close (bounded). Dropping the socket with unread data in it would reset the
/// connection, and the server could lose the last frames we sent.
async fn close_gracefully(framed: &mut Framed) {
    use awc::ws::{Frame, Message};
    if framed.send(Message::Close(None)).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(Ok(frame)) = framed.next().await {
            if matches!(frame, Frame::Close(_)) {
                break;
            }
        }
    })
    .await;
}

async fn send_json(framed: &mut Framed, msg: &NodeMessage) -> Result<(), Wire> {
    let text = serde_json::to_string(msg)?;
    framed.send(awc::ws::Message::Text(text.into())).await?;
    Ok(())
}
