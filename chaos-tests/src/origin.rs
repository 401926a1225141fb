//! An origin for model weights that the tests and the warmup benchmark start
//! in-process: a small HTTP/1.1 file server for one file, with
//! `Range: bytes=N-` (how a cut transfer resumes), that counts the bytes it
//! served and each GET's start offset, and can cap its bandwidth with a
//! token bucket shared by all its connections.
//!
//! The cap is an EMULATION of saturated shared storage (an NFS server or an
//! object store that every node reads at once): on one machine a real one is
//! not available, and loopback is far faster than any. Every figure measured
//! behind a cap says so ([`Origin::label`]).
//!
//! A silent origin accepts connections and reads requests but never answers:
//! storage that hangs, for the warming timeout. A broken one answers every
//! GET with 500 at once (counted like any GET): storage that fails fast, for
//! the retry backoff.
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes written to a connection per bucket draw.
const CHUNK: usize = 64 * 1024;
/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// How the origin behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct OriginOptions {
    /// Total bytes per second over all connections; `None`: as fast as it can.
    pub bytes_per_s: Option<u64>,
    /// Never answer (storage that hangs).
    pub silent: bool,
    /// Answer every request 500 at once (storage that fails fast).
    pub broken: bool,
}

impl OriginOptions {
    /// Capped at `bytes_per_s` over all connections (the emulation of
    /// saturated shared storage).
    pub fn capped(bytes_per_s: u64) -> OriginOptions {
        OriginOptions {
            bytes_per_s: Some(bytes_per_s),
            ..Default::default()
        }
    }

    /// Storage that hangs: requests are read, never answered.
    pub fn silent() -> OriginOptions {
        OriginOptions {
            silent: true,
            ..Default::default()
        }
    }

    /// Storage that fails fast: every GET is answered 500 at once.
    pub fn broken() -> OriginOptions {
        OriginOptions {
            broken: true,
            ..Default::default()
        }
    }
}

/// A token bucket in debt form: each draw takes its bytes at once and waits
/// until the rate has paid for them, so the total over all connections never
/// runs ahead of the rate, and connections are served in the order they draw.
struct Bucket {
    /// Bytes per second; 0 = no cap.
    rate: AtomicU64,
    /// When the bytes drawn so far have been paid for.
    paid_until: Mutex<Instant>,
}

impl Bucket {
    fn draw(&self, bytes: usize) {
        let rate = self.rate.load(Ordering::Relaxed);
        if rate == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let wait = {
            let mut paid = match self.paid_until.lock() {
                Ok(p) => p,
                Err(poisoned) => poisoned.into_inner(),
            };
            let now = Instant::now();
            // An idle bucket holds no credit beyond this instant (no burst).
            let start = (*paid).max(now);
            *paid = start + cost;
            *paid - now
        };
        std::thread::sleep(wait);
    }
}

/// What the origin has seen.
#[derive(Default)]
struct Counters {
    bytes_served: AtomicU64,
    /// Start offset of each GET of the file (0 without a Range), answered or not.
    gets: Mutex<Vec<u64>>,
    /// When each of those GETs arrived.
    gets_at: Mutex<Vec<Instant>>,
}

/// A running origin; stops when dropped.
pub struct Origin {
    addr: String,
    name: String,
    bucket: Arc<Bucket>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

impl Origin {
    /// Serves `file` at `http://127.0.0.1:<port>/<file name>`.
    pub fn serve(file: &Path, opts: OriginOptions) -> std::io::Result<Origin> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?.to_string();
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let origin = Origin {
            addr,
            name: name.clone(),
            bucket: Arc::new(Bucket {
                rate: AtomicU64::new(opts.bytes_per_s.unwrap_or(0)),
                paid_until: Mutex::new(Instant::now()),
            }),
            counters: Arc::default(),
            stop: Arc::default(),
        };
        let served = Served {
            file: file.to_path_buf(),
            name,
            silent: opts.silent,
            broken: opts.broken,
            bucket: origin.bucket.clone(),
            counters: origin.counters.clone(),
            stop: origin.stop.clone(),
        };
        std::thread::spawn(move || accept_loop(listener, Arc::new(served)));
        Ok(origin)
    }

    /// The uri a registration names.
    pub fn url(&self) -> String {
        format!("http://{}/{}", self.addr, self.name)
    }

    /// Body bytes written to clients so far.
    pub fn bytes_served(&self) -> u64 {
        self.counters.bytes_served.load(Ordering::Relaxed)
    }

    /// The start offset of every GET so far (0: from the beginning).
    pub fn gets(&self) -> Vec<u64> {
        match self.counters.gets.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// When each GET so far arrived, in order.
    pub fn gets_at(&self) -> Vec<Instant> {
        match self.counters.gets_at.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Changes the cap (`None`: none) for the bytes drawn from now on.
    pub fn set_bytes_per_s(&self, rate: Option<u64>) {
        self.bucket.rate.store(rate.unwrap_or(0), Ordering::Relaxed);
    }

    /// How every output measured against this origin names it.
    pub fn label(&self) -> String {
        label(self.bucket.rate.load(Ordering::Relaxed))
    }
}

/// "origin: emulated shared storage, bandwidth capped at 100 MB/s" (MB =
/// 10^6 bytes), or "uncapped" for 0.
pub fn label(bytes_per_s: u64) -> String {
    if bytes_per_s == 0 {
        return "origin: local HTTP file server, bandwidth uncapped".into();
    }
    format!(
        "origin: emulated shared storage, bandwidth capped at {} MB/s",
        bytes_per_s as f64 / 1e6
    )
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What every connection thread shares.
struct Served {
    file: PathBuf,
    name: String,
    silent: bool,
    broken: bool,
    bucket: Arc<Bucket>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

fn accept_loop(listener: TcpListener, served: Arc<Served>) {
    while !served.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let served = served.clone();
                std::thread::spawn(move || {
                    // A client that went away is no error of the origin's.
                    let _ = serve_one(stream, &served);
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// The parts of a request the origin looks at.
struct Request {
    method: String,
    path: String,
    /// `Range: bytes=N-` or `bytes=N-M`.
    range: Option<(u64, Option<u64>)>,
}

fn read_request(stream: &TcpStream) -> std::io::Result<Request> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.take(MAX_HEAD as u64));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = parse_range(v.trim());
            }
        }
    }
    Ok(Request {
        method,
        path,
        range,
    })
}

/// `bytes=N-` or `bytes=N-M` (inclusive end).
fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let (start, end) = v.strip_prefix("bytes=")?.split_once('-')?;
    let start = start.trim().parse().ok()?;
    let end = match end.trim() {
        "" => None,
        e => Some(e.parse().ok()?),
    };
    Some((start, end))
}

fn serve_one(mut stream: TcpStream, served: &Served) -> std::io::Result<()> {
    let req = read_request(&stream)?;
    let head_only = req.method == "HEAD";
    if !(head_only || req.method == "GET") || req.path != format!("/{}", served.name) {
        return write!(
            stream,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }
    if !head_only {
        if let Ok(mut g) = served.counters.gets.lock() {
            g.push(req.range.map_or(0, |(start, _)| start));
        }
        if let Ok(mut g) = served.counters.gets_at.lock() {
            g.push(Instant::now());
        }
    }
    if served.broken {
        return write!(
            stream,
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }
    if served.silent {
        while !served.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        return Ok(());
    }
    let mut file = std::fs::File::open(&served.file)?;
    let len = file.metadata()?.len();
    let (start, end) = match req.range {
        None => (0, len),
        Some((s, e)) => (s, e.map_or(len, |e| (e + 1).min(len))),
    };
    if req.range.is_some() && start >= len.max(1) {
        return write!(
            stream,
            "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }
    let status = match req.range {
        None => "200 OK".to_string(),
        Some(_) => format!(
            "206 Partial Content\r\nContent-Range: bytes {start}-{}/{len}",
            end.saturating_sub(1)
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        end - start
    )?;
    if head_only {
        return Ok(());
    }
    file.seek(SeekFrom::Start(start))?;
    let mut buf = vec![0u8; CHUNK];
    let mut left = end - start;
    while left > 0 && !served.stop.load(Ordering::Relaxed) {
        let n = left.min(CHUNK as u64) as usize;
        file.read_exact(&mut buf[..n])?;
        served.bucket.draw(n);
        stream.write_all(&buf[..n])?;
        served
            .counters
            .bytes_served
            .fetch_add(n as u64, Ordering::Relaxed);
        left -= n as u64;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::generate;

    /// A raw GET with an optional range; the status line and the body.
    fn get(url: &str, range: Option<&str>) -> (String, Vec<u8>) {
        let rest = url.strip_prefix("http://").unwrap();
        let (addr, path) = rest.split_once('/').unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        let range = range.map(|r| format!("Range: {r}\r\n")).unwrap_or_default();
        write!(s, "GET /{path} HTTP/1.1\r\nHost: x\r\n{range}\r\n").unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..at]).to_string();
        (
            head.lines().next().unwrap().to_string(),
            raw[at + 4..].to_vec(),
        )
    }

    #[test]
    fn serves_the_file_whole_and_from_an_offset_and_counts_it() {
        let dir = tempfile::tempdir().unwrap();
        let w = generate(&dir.path().join("w.bin"), 200_000, 3).unwrap();
        let bytes = std::fs::read(&w.path).unwrap();
        let o = Origin::serve(&w.path, OriginOptions::default()).unwrap();
        let (status, body) = get(&o.url(), None);
        assert!(status.contains("200"), "{status}");
        assert_eq!(body, bytes);
        let (status, body) = get(&o.url(), Some("bytes=150000-"));
        assert!(status.contains("206"), "{status}");
        assert_eq!(body, &bytes[150_000..]);
        let (status, _) = get(&o.url(), Some("bytes=200000-"));
        assert!(status.contains("416"), "{status}");
        let (status, _) = get(&o.url().replace("w.bin", "other"), None);
        assert!(status.contains("404"), "{status}");
        assert_eq!(o.bytes_served(), 250_000);
        // Every GET of the file is recorded, the refused range too.
        assert_eq!(o.gets(), vec![0, 150_000, 200_000]);
    }

    #[test]
    fn a_silent_origin_records_the_get_and_answers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let w = generate(&dir.path().join("w.bin"), 1000, 3).unwrap();
        let o = Origin::serve(&w.path, OriginOptions::silent()).unwrap();
        let rest = o.url().strip_prefix("http://").unwrap().to_string();
        let (addr, path) = rest.split_once('/').unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET /{path} HTTP/1.1\r\nRange: bytes=10-\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut buf = [0u8; 16];
        assert!(s.read(&mut buf).is_err(), "a silent origin answered");
        assert_eq!(o.gets(), vec![10]);
        assert_eq!(o.bytes_served(), 0);
    }

    #[test]
    fn the_cap_holds_two_readers_to_its_rate_together() {
        let dir = tempfile::tempdir().unwrap();
        let w = generate(&dir.path().join("w.bin"), 400_000, 3).unwrap();
        let o = Origin::serve(&w.path, OriginOptions::capped(2_000_000)).unwrap();
        assert_eq!(
            o.label(),
            "origin: emulated shared storage, bandwidth capped at 2 MB/s"
        );
        let t0 = Instant::now();
        let url = o.url();
        let other = std::thread::spawn(move || get(&url, None).1.len());
        assert_eq!(get(&o.url(), None).1.len(), 400_000);
        assert_eq!(other.join().unwrap(), 400_000);
        // 800 kB at 2 MB/s cannot take less than 0.4 s (a floor, not a timing).
        assert!(
            t0.elapsed() >= Duration::from_millis(390),
            "{:?}",
            t0.elapsed()
        );
    }
}
