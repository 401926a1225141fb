//! A weights origin the tests start: an HTTP file server (actix-web) that
//! honours `Range: bytes=N-` (or, told so, ignores it and answers 200), can
//! be slowed down, and records the ranges it was asked for.
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bytes per chunk of a slowed-down answer.
const CHUNK: usize = 16 * 1024;

#[derive(Default)]
pub struct OriginState {
    pub dir: PathBuf,
    /// Pause after each chunk, ms (0: full speed).
    pub delay_ms: AtomicU64,
    /// False: the origin ignores Range and always sends the whole file.
    pub ranges: AtomicBool,
    /// The Range header of every request (None: none sent).
    pub asked: Mutex<Vec<Option<String>>>,
}

pub struct Origin {
    pub url: String,
    pub state: Arc<OriginState>,
    pub handle: actix_web::dev::ServerHandle,
}

impl Origin {
    /// `http://…/<name>` of a file in the origin's dir.
    pub fn uri(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    /// The Range headers asked for so far.
    pub fn asked(&self) -> Vec<Option<String>> {
        self.state.asked.lock().unwrap().clone()
    }
}

/// Serves the files of `dir` on an ephemeral port.
pub fn start(dir: &Path) -> Origin {
    let state = Arc::new(OriginState {
        dir: dir.to_path_buf(),
        ranges: AtomicBool::new(true),
        ..OriginState::default()
    });
    let data = web::Data::from(state.clone());
    let (url, handle) = super::http_server(move |cfg| {
        cfg.app_data(data.clone())
            .route("/{name}", web::get().to(serve));
    });
    Origin { url, state, handle }
}

async fn serve(
    req: HttpRequest,
    name: web::Path<String>,
    state: web::Data<OriginState>,
) -> HttpResponse {
    let range = req
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    state.asked.lock().unwrap().push(range.clone());
    let Ok(bytes) = std::fs::read(state.dir.join(name.as_str())) else {
        return HttpResponse::NotFound().finish();
    };
    let size = bytes.len();
    let start = match (&range, state.ranges.load(Ordering::Relaxed)) {
        (Some(r), true) => r
            .strip_prefix("bytes=")
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let mut response = if start > 0 {
        let mut r = HttpResponse::PartialContent();
        r.insert_header((
            "Content-Range",
            format!("bytes {start}-{}/{size}", size - 1),
        ));
        r
    } else {
        HttpResponse::Ok()
    };
    let delay = state.delay_ms.load(Ordering::Relaxed);
    let chunks: Vec<Vec<u8>> = bytes[start..].chunks(CHUNK).map(<[u8]>::to_vec).collect();
    let body = futures_util::stream::iter(chunks).then(move |c| async move {
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        Ok::<_, std::io::Error>(web::Bytes::from(c))
    });
    response.no_chunking((size - start) as u64).streaming(body)
}
