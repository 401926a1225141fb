//! The peer server (`--peer-listen`): `GET /v1/weights/{sha256}` serves a
//! verified copy, read-only, to the bearer of a live [`grants::Grants`]
//! entry for that version; `Range: bytes=N-` resumes a cut transfer. 401
//! without a live grant for the version (before anything is said about what
//! the node holds), 404 for a version it does not hold.
//!
//! A receiver that names the size it expects (`?size=N`, the registered
//! size) is also served a copy this node is still fetching: its partial
//! file, as a stream that follows the file as it grows (see [`growing`]),
//! so a rollout's peer copies overlap the one origin read instead of
//! waiting for it (`peer-stream-partial` on the control plane). Those bytes
//! are not verified here; the receiver checks the whole copy's SHA-256
//! before anything uses it, as it does for every source.
pub mod grants;
pub mod growing;
pub mod pace;
pub mod range;

use super::layout::Layout;

use super::layout::is_sha256;
use actix_web::http::header;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures_util::stream;
use grants::Grants;
use pace::Pace;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncSeekExt;

/// Bytes per read and per paced send.
const CHUNK: usize = 64 * 1024;

/// What the server's handlers share with the agent.
#[derive(Debug)]
pub struct PeerShared {
    pub grants: Mutex<Grants>,
    pub layout: Layout,
    /// Whom each copy and partial serves (kept by the cache).
    pub access: super::access::SharedAccess,
    /// Bytes sent, folded into the cache's counters.
    pub served: Arc<AtomicU64>,
    pub pace: Option<Pace>,
}

impl PeerShared {
    /// Records a grant from the control plane.
    pub fn grant(
        &self,
        token: &str,
        sha256: &str,
        receiver: &str,
        expires_at_ms: u64,
        owner: Option<&str>,
    ) {
        let mut g = self.grants.lock().unwrap_or_else(|p| p.into_inner());
        g.add(
            token,
            grants::Granted {
                sha256,
                receiver,
                owner,
            },
            expires_at_ms,
            crate::runtime::now_ms(),
        );
    }
}

/// A running peer server.
pub struct PeerServer {
    /// What the hello advertises.
    pub url: String,
    handle: actix_web::dev::ServerHandle,
}

impl PeerServer {
    /// Binds `listen` and serves in the background (one worker thread; no
    /// signal handling of its own: the agent's handlers stay in charge).
    pub fn start(
        listen: &str,
        advertise: Option<String>,
        shared: Arc<PeerShared>,
    ) -> std::io::Result<PeerServer> {
        let data = web::Data::from(shared);
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/v1/weights/{sha256}", web::get().to(serve))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(0)
        .bind(listen)?;
        let addr = server.addrs().first().copied().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, "bound no address")
        })?;
        let server = server.run();
        let handle = server.handle();
        actix_rt::spawn(server);
        let url = advertise.unwrap_or_else(|| format!("http://{addr}"));
        tracing::info!("serving verified weight copies to peers on {addr} (advertised {url})");
        Ok(PeerServer { url, handle })
    }

    /// Stops serving, cutting transfers in flight.
    pub async fn stop(self) {
        self.handle.stop(false).await;
    }
}

fn bearer(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

async fn serve(
    req: HttpRequest,
    path: web::Path<String>,
    shared: web::Data<PeerShared>,
) -> HttpResponse {
    let sha = path.into_inner();
    let granted = {
        let grants = shared.grants.lock().unwrap_or_else(|p| p.into_inner());
        bearer(&req)
            .and_then(|t| grants.receiver(t, &sha, crate::runtime::now_ms()))
            .map(|(r, owner)| (r.to_string(), owner.map(String::from)))
    };
    let Some((receiver, owner)) = granted else {
        return HttpResponse::Unauthorized().body("no live grant for this version\n");
    };
    let missing = || HttpResponse::NotFound().body("this node holds no verified copy of it\n");
    if !is_sha256(&sha) {
        return missing();
    }
    let expected = expected_size(&req);
    // Only what was obtained for the receiver's audience: a copy another
    // tenant's version brought is, to this receiver, not here.
    let (copy_ok, partial_ok) = {
        let a = shared.access.lock().unwrap_or_else(|p| p.into_inner());
        (
            a.copy_serves(&sha, owner.as_deref()),
            a.partial_serves(&sha, owner.as_deref()),
        )
    };
    let copy = match copy_ok {
        true => tokio::fs::File::open(shared.layout.copy(&sha)).await,
        false => Err(std::io::ErrorKind::NotFound.into()),
    };
    let expected = expected.filter(|_| partial_ok);
    let (mut file, size, growing) = match copy {
        Ok(file) => match file.metadata().await {
            Ok(m) => (file, m.len(), false),
            Err(_) => return missing(),
        },
        Err(_) => match expected {
            // Still fetching here: the partial, followed as it grows.
            Some(size) => match tokio::fs::File::open(shared.layout.partial(&sha)).await {
                Ok(file) => (file, size, true),
                Err(_) => return missing(),
            },
            None => return missing(),
        },
    };
    let asked = req
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok());
    let span = match range::parse(asked, size) {
        Ok(span) => span,
        Err(range::Unsatisfiable) => {
            return HttpResponse::RangeNotSatisfiable()
                .insert_header((header::CONTENT_RANGE, format!("bytes */{size}")))
                .finish()
        }
    };
    let (start, end) = span.map(|s| (s.start, s.end)).unwrap_or((0, size));
    if start > 0 && file.seek(std::io::SeekFrom::Start(start)).await.is_err() {
        return missing();
    }
    let what = if growing {
        "a copy still arriving"
    } else {
        "a verified copy"
    };
    tracing::info!("serving {sha} bytes {start}-{end} ({what}) to {receiver}");
    let mut response = match span {
        Some(_) => {
            let mut r = HttpResponse::PartialContent();
            r.insert_header((
                header::CONTENT_RANGE,
                format!("bytes {start}-{}/{size}", end - 1),
            ));
            r
        }
        None => HttpResponse::Ok(),
    };
    response
        .insert_header((header::ACCEPT_RANGES, "bytes"))
        .no_chunking(end - start)
        .streaming(body(file, end - start, growing, shared.into_inner()))
}

/// The `size` query parameter: the bytes the receiver expects in all.
fn expected_size(req: &HttpRequest) -> Option<u64> {
    req.query_string()
        .split('&')
        .find_map(|kv| kv.strip_prefix("size="))
        .and_then(|v| v.parse().ok())
}

/// The file's next `left` bytes, paced and counted; a `growing` file is
/// waited for when it has no more bytes yet.
fn body(
    file: tokio::fs::File,
    left: u64,
    growing: bool,
    shared: Arc<PeerShared>,
) -> impl futures_util::Stream<Item = Result<web::Bytes, std::io::Error>> {
    let reader = growing::Reader::new(file, growing);
    stream::unfold(
        (reader, left, shared),
        |(mut reader, left, shared)| async move {
            if left == 0 {
                return None;
            }
            let buf = match reader.next_chunk(CHUNK.min(left as usize)).await {
                Ok(buf) => buf,
                Err(e) => return Some((Err(e), (reader, 0, shared))),
            };
            if let Some(pace) = &shared.pace {
                tokio::time::sleep(pace.book(buf.len())).await;
            }
            shared.served.fetch_add(buf.len() as u64, Ordering::Relaxed);
            let left = left - buf.len() as u64;
            Some((Ok(web::Bytes::from(buf)), (reader, left, shared)))
        },
    )
}
