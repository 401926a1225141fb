//! The HTTP parser's own refusals in the envelope. When a request cannot be
//! parsed at all (a header byte HTTP forbids, a Content-Length of 20 digits,
//! a request line that is not UTF-8, a head past the read buffer) or its head
//! does not arrive in time, actix-http answers 400, 431 or 408 itself, with
//! an empty body, before any handler or middleware sees a request. Those
//! answers are rewritten here, on the connection's bytes: [`Enveloped`]
//! wraps each accepted TCP stream and follows the answers written to it.
//!
//! Following means knowing where each answer ends, exactly: a head up to its
//! blank line, then `content-length` bytes or chunks to the last one. An
//! answer that declares neither (a body that ends with the connection, an
//! upgrade to WebSocket) ends the following, and every byte after it passes
//! untouched. Only an answer head that is 400, 408 or 431 with
//! `content-length: 0` is rewritten: it gets the envelope as its body and
//! the matching `content-length`, so a client still reads each answer whole.
//! Bodies are never looked into, so what a workload prints (a task's log)
//! cannot be taken for an answer. A HEAD answer declares a length it does not
//! send, so the gateway closes the connection after one (`error_envelope`).
use crate::error_envelope::{default_message, envelope_json};
use actix_web::http::StatusCode;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Longest answer head followed; a longer one ends the following.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size or trailer line followed.
const MAX_LINE: usize = 4096;

/// A connection whose parser-level error answers carry the envelope.
pub struct Enveloped<T> {
    inner: T,
    answers: Answers,
    /// Bytes accepted from the writer, rewritten, not yet on the wire.
    pending: Vec<u8>,
    /// Of `pending`, how many the stream took already.
    sent: usize,
}

impl<T> Enveloped<T> {
    pub fn new(inner: T) -> Enveloped<T> {
        Enveloped {
            inner,
            answers: Answers::default(),
            pending: Vec::new(),
            sent: 0,
        }
    }
}

impl<T: AsyncWrite + Unpin> Enveloped<T> {
    /// Writes what is pending; `Ready(Ok)` once all of it is on the stream.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = match Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Enveloped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Enveloped<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // Earlier bytes go first: nothing new is taken while they wait.
        match this.drain(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        this.answers.feed(buf, &mut this.pending);
        // Taken: what the stream does not take now is written on the next
        // write or flush (an error then is reported there).
        if let Poll::Ready(Err(e)) = this.drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

/// Where in the stream of answers the next byte falls.
#[derive(Debug)]
enum Answers {
    /// An answer's head, up to its blank line.
    Head(Vec<u8>),
    /// This many bytes of a `content-length` body.
    Body(u64),
    /// A chunk-size line of a chunked body.
    ChunkSize(Vec<u8>),
    /// This many bytes of a chunk, then its CRLF.
    ChunkData(u64),
    /// The trailer lines after the last chunk, up to a blank line.
    Trailer(Vec<u8>),
    /// Not followed any more: every byte passes as it is.
    Through,
}

impl Default for Answers {
    fn default() -> Answers {
        Answers::Head(Vec::new())
    }
}

impl Answers {
    /// Follows `input`, appending it, with any parser error answer
    /// rewritten, to `out`.
    fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            match self {
                Answers::Through => {
                    out.extend_from_slice(input);
                    return;
                }
                Answers::Body(left) | Answers::ChunkData(left) => {
                    let n = (*left).min(input.len() as u64) as usize;
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    *left -= n as u64;
                    if *left == 0 {
                        *self = match self {
                            Answers::Body(_) => Answers::Head(Vec::new()),
                            // The chunk's CRLF, then the next size line.
                            _ => Answers::ChunkSize(Vec::new()),
                        };
                    }
                }
                Answers::Head(head) => {
                    let (taken, done) = take_until(head, input, b"\r\n\r\n");
                    input = &input[taken..];
                    if done {
                        let head = std::mem::take(head);
                        *self = answer(&head, out);
                    } else if head.len() > MAX_HEAD {
                        out.extend_from_slice(head);
                        *self = Answers::Through;
                    }
                }
                Answers::ChunkSize(line) => {
                    let (taken, done) = take_until(line, input, b"\r\n");
                    out.extend_from_slice(&input[..taken]);
                    input = &input[taken..];
                    if done {
                        *self = match chunk_size(line) {
                            // A chunk's CRLF ends the line before its size line.
                            _ if line.as_slice() == b"\r\n" => Answers::ChunkSize(Vec::new()),
                            Some(0) => Answers::Trailer(Vec::new()),
                            Some(n) => Answers::ChunkData(n),
                            None => Answers::Through,
                        };
                    } else if line.len() > MAX_LINE {
                        *self = Answers::Through;
                    }
                }
                Answers::Trailer(lines) => {
                    let (taken, done) = take_until(lines, input, b"\r\n");
                    out.extend_from_slice(&input[..taken]);
                    input = &input[taken..];
                    if done {
                        *self = if lines.as_slice() == b"\r\n" || lines.ends_with(b"\r\n\r\n") {
                            Answers::Head(Vec::new())
                        } else if lines.len() > MAX_LINE {
                            Answers::Through
                        } else {
                            continue;
                        };
                    }
                }
            }
        }
    }
}

/// Moves bytes of `input` onto `acc` until `acc` ends with `end`: how many
/// it took and whether `end` was reached.
fn take_until(acc: &mut Vec<u8>, input: &[u8], end: &[u8]) -> (usize, bool) {
    for (i, b) in input.iter().enumerate() {
        acc.push(*b);
        if acc.ends_with(end) {
            return (i + 1, true);
        }
    }
    (input.len(), false)
}

/// A chunk-size line's size (hex, extensions after `;` ignored).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?.trim_end_matches("\r\n");
    let hex = text.split(';').next()?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// What a head says about the answer's body.
struct Head<'a> {
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    lines: Vec<&'a str>,
}

fn parse_head(head: &[u8]) -> Option<Head<'_>> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse::<u16>().ok()?;
    let mut parsed = Head {
        status,
        content_length: None,
        chunked: false,
        lines: vec![status_line],
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            parsed.content_length = Some(value.parse().ok()?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            parsed.chunked = value.to_ascii_lowercase().contains("chunked");
        }
        parsed.lines.push(line);
    }
    Some(parsed)
}

/// Writes `head` (rewritten when it is a parser error's) to `out` and says
/// where the stream goes next.
fn answer(head: &[u8], out: &mut Vec<u8>) -> Answers {
    let Some(parsed) = parse_head(head) else {
        out.extend_from_slice(head);
        return Answers::Through;
    };
    match parsed.status {
        101 => {
            out.extend_from_slice(head);
            return Answers::Through;
        }
        100..=199 | 204 | 304 => {
            out.extend_from_slice(head);
            return Answers::Head(Vec::new());
        }
        _ => {}
    }
    if parsed.chunked {
        out.extend_from_slice(head);
        return Answers::ChunkSize(Vec::new());
    }
    match parsed.content_length {
        Some(0) if matches!(parsed.status, 400 | 408 | 431) => {
            enveloped(&parsed, out);
            Answers::Head(Vec::new())
        }
        Some(0) => {
            out.extend_from_slice(head);
            Answers::Head(Vec::new())
        }
        Some(n) => {
            out.extend_from_slice(head);
            Answers::Body(n)
        }
        None => {
            out.extend_from_slice(head);
            Answers::Through
        }
    }
}

/// The parser error answer `parsed` with the envelope as its body.
fn enveloped(parsed: &Head<'_>, out: &mut Vec<u8>) {
    let status = StatusCode::from_u16(parsed.status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = envelope_json(status, default_message(status));
    let kept = parsed.lines.iter().filter(|l| {
        let name = l.split(':').next().unwrap_or("");
        !name.eq_ignore_ascii_case("content-length") && !name.eq_ignore_ascii_case("content-type")
    });
    for line in kept {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-type: application/json\r\n");
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `input` fed in pieces of `step` bytes.
    fn follow(input: &[u8], step: usize) -> Vec<u8> {
        let mut a = Answers::default();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            a.feed(piece, &mut out);
        }
        out
    }

    const BAD: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\ndate: Thu, 03 Dec 2026 12:00:00 GMT\r\n\r\n";

    fn body_of(answer: &[u8]) -> serde_json::Value {
        let text = String::from_utf8_lossy(answer);
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn an_empty_parser_error_gets_the_envelope_and_its_length() {
        for step in [1, 7, BAD.len()] {
            let out = follow(BAD, step);
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
            assert!(text.contains("connection: close\r\n"));
            let json = body_of(&out);
            assert_eq!(json["code"], 40030);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(
                head.contains(&format!("content-length: {}", body.len())),
                "{head}"
            );
        }
    }

    #[test]
    fn bodies_are_passed_whole_and_never_read_as_answers() {
        // A log that prints a parser error's head, then a real one.
        let log = String::from_utf8_lossy(BAD).to_string();
        let first = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{log}",
            log.len()
        );
        let chunked = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{log}\r\n0\r\n\r\n",
            log.len()
        );
        let stream = [first.as_bytes(), chunked.as_bytes(), BAD].concat();
        for step in [1, 3, 64, stream.len()] {
            let out = follow(&stream, step);
            let prefix = first.len() + chunked.len();
            assert_eq!(&out[..prefix], &stream[..prefix], "bodies untouched");
            assert_eq!(
                body_of(&out[prefix..])["code"],
                40030,
                "the real one rewritten"
            );
        }
    }

    #[test]
    fn other_answers_and_anything_after_an_upgrade_pass_untouched() {
        let ok = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec();
        assert_eq!(follow(&ok, 5), ok);
        let upgrade = [
            &b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n"[..],
            BAD,
        ]
        .concat();
        assert_eq!(
            follow(&upgrade, 4),
            upgrade,
            "frames after 101 are not answers"
        );
        let close_delimited = [&b"HTTP/1.1 200 OK\r\n\r\n"[..], BAD].concat();
        assert_eq!(follow(&close_delimited, 9), close_delimited);
    }

    #[test]
    fn timeouts_and_heads_too_large_get_their_codes() {
        for (status, code) in [(408, 40801), (431, 43130)] {
            let head = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
            assert_eq!(body_of(&follow(head.as_bytes(), 10))["code"], code);
        }
    }
}
