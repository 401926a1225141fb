//! The WebSocket session with the control plane, as one long-lived task: connect
//! (bearer = join token), pump JSON text frames both ways, detect a dead server,
//! reconnect forever with backoff. It knows the protocol only as far as
//! liveness needs (a welcome arrived; a refusal ends the connection); what
//! to say is decided by the agent loop, which gets [`SessionEvent`]s.
pub mod backoff;

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
                let (tx, rx) = unbounded_channel();
                if events
                    .send(SessionEvent::Connected {
                        generation,
                        outbound: tx,
                    })
                    .is_err()
                {
                    return;
                }
                let end = pump(&config, framed, rx, &events, generation, &mut shutdown).await;
                tracing::warn!("session {generation} ended: {}", end.reason);
                let _ = events.send(SessionEvent::Disconnected {
                    generation,
                    reason: end.reason,
                });
                if end.shutdown {
                    return;
                }
                if end.welcomed {
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

type Framed = actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>;

async fn connect(config: &SessionConfig) -> Result<Framed, String> {
    let client = awc::Client::builder()
        .timeout(config.connect_timeout)
        .finish();
    let (_response, framed) = client
        .ws(config.url.as_str())
        .bearer_auth(&config.token)
        .max_frame_size(MAX_FRAME_BYTES)
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(framed)
}

/// How a connection ended.
struct End {
    reason: String,
    welcomed: bool,
    shutdown: bool,
}

async fn pump(
    config: &SessionConfig,
    mut framed: Framed,
    mut outbound: UnboundedReceiver<NodeMessage>,
    events: &UnboundedSender<SessionEvent>,
    generation: u64,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    use awc::ws::{Frame, Message};
    let connected_at = Instant::now();
    let mut last_heard = Instant::now();
    let mut pong_seen = false;
    let mut welcomed = false;
    let mut ping = tokio::time::interval(config.ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let end = |reason: String, welcomed: bool| End {
        reason,
        welcomed,
        shutdown: false,
    };
    loop {
        tokio::select! {
            _ = shutdown.changed() => {
                // Deliver what the agent queued before it asked us to stop.
                while let Ok(msg) = outbound.try_recv() {
                    if send_json(&mut framed, &msg).await.is_err() {
                        break;
                    }
                }
                close_gracefully(&mut framed).await;
                return End { reason: "agent shutting down".into(), welcomed, shutdown: true };
            }
            out = outbound.recv() => match out {
                Some(msg) => {
                    if let Err(e) = send_json(&mut framed, &msg).await {
                        return end(format!("send failed: {e}"), welcomed);
                    }
                }
                None => return end("agent dropped the session".into(), welcomed),
            },
            frame = framed.next() => match frame {
                None => return end("server closed the connection".into(), welcomed),
                Some(Err(e)) => return end(format!("protocol error: {e}"), welcomed),
                Some(Ok(Frame::Text(bytes))) => {
                    last_heard = Instant::now();
                    match serde_json::from_slice::<ServerMessage>(&bytes) {
                        Ok(message) => {
                            let refused = match &message {
                                ServerMessage::Welcome(_) => { welcomed = true; false }
                                ServerMessage::Refused { .. } => true,
                                _ => false,
                            };
                            if events.send(SessionEvent::Message { generation, message }).is_err() {
                                return End { reason: "agent gone".into(), welcomed, shutdown: true };
                            }
                            if refused {
                                close_gracefully(&mut framed).await;
                                return end("control plane refused the hello".into(), welcomed);
                            }
                        }
                        Err(e) => {
                            let preview: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
                            tracing::warn!("ignoring an unreadable message from the control plane ({e}): {preview}");
                        }
                    }
                }
                Some(Ok(Frame::Ping(payload))) => {
                    last_heard = Instant::now();
                    if let Err(e) = framed.send(Message::Pong(payload)).await {
                        return end(format!("send failed: {e}"), welcomed);
                    }
                }
                Some(Ok(Frame::Pong(_))) => {
                    last_heard = Instant::now();
                    pong_seen = true;
                }
                Some(Ok(Frame::Close(reason))) => {
                    return end(format!("server closed the session ({reason:?})"), welcomed);
                }
                Some(Ok(Frame::Binary(_) | Frame::Continuation(_))) => {
                    tracing::warn!("ignoring a binary/fragmented frame from the control plane");
                }
            },
            _ = ping.tick() => {
                if !welcomed && connected_at.elapsed() > config.welcome_timeout {
                    return end(format!("no welcome within {:?}", config.welcome_timeout), welcomed);
                }
                // Only a server that has shown it answers pings can be judged by their absence.
                let silent = last_heard.elapsed();
                if pong_seen && silent > config.ping_interval * 3 {
                    return end(format!("server silent for {silent:?}"), welcomed);
                }
                if let Err(e) = framed.send(Message::Ping(Default::default())).await {
                    return end(format!("send failed: {e}"), welcomed);
                }
            }
        }
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

async fn send_json(framed: &mut Framed, msg: &NodeMessage) -> Result<(), String> {
    let text = serde_json::to_string(msg).map_err(|e| e.to_string())?;
    framed
        .send(awc::ws::Message::Text(text.into()))
        .await
        .map_err(|e| e.to_string())
}
