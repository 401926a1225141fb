//! A keep-alive HTTP/1.1 connection: many requests over one socket, one at a
//! time, as a busy client of the data platform would send them. The benchmark
//! uses it so that what is timed is the server's work, not TCP handshakes.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// No single answer may take longer than this; the benchmarks stay bounded.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One open connection to `addr` carrying `token` on every request.
pub struct KeepAlive {
    addr: String,
    token: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// Status and raw body of one answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

impl KeepAlive {
    /// Connects with Nagle off, so a small request leaves at once.
    pub fn open(addr: &str, token: &str) -> std::io::Result<KeepAlive> {
        let writer = TcpStream::connect(addr)?;
        writer.set_nodelay(true)?;
        writer.set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(KeepAlive {
            addr: addr.to_string(),
            token: token.to_string(),
            reader: BufReader::new(writer.try_clone()?),
            writer,
        })
    }

    /// `GET path`.
    pub fn get(&mut self, path: &str) -> std::io::Result<Answer> {
        self.request("GET", path, "")
    }

    /// `POST path` with a JSON body.
    pub fn post(&mut self, path: &str, body: &str) -> std::io::Result<Answer> {
        self.request("POST", path, body)
    }

    /// Sends one request and reads its whole answer (Content-Length or chunked).
    pub fn request(&mut self, method: &str, path: &str, body: &str) -> std::io::Result<Answer> {
        // One write per request: a request split over two segments would add a
        // delayed-ACK round trip to every measurement.
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        );
        self.writer.write_all(req.as_bytes())?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "server closed the connection",
            ));
        }
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut len, mut chunked) = (0usize, false);
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 || line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let body = if chunked {
            self.read_chunked()?
        } else {
            let mut buf = vec![0; len];
            self.reader.read_exact(&mut buf)?;
            buf
        };
        Ok(Answer { status, body })
    }

    fn read_chunked(&mut self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim(), 16)
                .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk)?;
            if size == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..size]);
        }
    }
}
