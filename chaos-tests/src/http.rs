//! A deliberately tiny blocking HTTP/1.1 client over `TcpStream`, so that the
//! tests exercise the server's real socket without pulling in a client stack.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A client bound to one server and one bearer token.
#[derive(Clone, Debug)]
pub struct Api {
    pub addr: String,
    pub token: Option<String>,
}

/// Status and parsed JSON body (the raw text as a JSON string when the body
/// is not JSON, e.g. `/metrics`).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: serde_json::Value,
    /// Response headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Reply {
    /// The value of header `name` (any case), if the response had it.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The envelope's `data`.
    pub fn data(&self) -> &serde_json::Value {
        &self.body["data"]
    }
}

/// The value of header `name` (any case) among `headers` (names in lower case).
pub fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

impl Api {
    pub fn new(addr: &str, token: Option<&str>) -> Api {
        Api {
            addr: addr.to_string(),
            token: token.map(str::to_string),
        }
    }

    pub fn with_token(&self, token: &str) -> Api {
        Api {
            addr: self.addr.clone(),
            token: Some(token.to_string()),
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &str) -> Reply {
        self.request("POST", path, Some(body))
    }

    pub fn put(&self, path: &str, body: &str) -> Reply {
        self.request("PUT", path, Some(body))
    }

    /// GET with an `Accept` header (e.g. `text/csv`).
    pub fn get_accepting(&self, path: &str, accept: &str) -> Reply {
        self.send("GET", path, None, &format!("Accept: {accept}\r\n"))
    }

    /// One request on a fresh connection. Connection failures come back as status 0.
    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> Reply {
        self.send(method, path, body, "")
    }

    /// A request with `extra` header lines (each ending in `\r\n`); a
    /// `Content-Type` among them replaces the JSON one (a portal form).
    pub fn send(&self, method: &str, path: &str, body: Option<&str>, extra: &str) -> Reply {
        match self.try_request(method, path, body, extra) {
            Ok(r) => r,
            Err(e) => Reply {
                status: 0,
                body: serde_json::json!({"transport_error": e.to_string()}),
                headers: Vec::new(),
            },
        }
    }

    fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        extra: &str,
    ) -> std::io::Result<Reply> {
        let json = match extra.to_ascii_lowercase().contains("content-type:") {
            true => "",
            false => "Content-Type: application/json\r\n",
        };
        let mut s = TcpStream::connect(&self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let body = body.unwrap_or("");
        let auth = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}{extra}{json}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        let payload = if chunked {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        let headers = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(Reply {
            status,
            body: serde_json::from_str(&payload).unwrap_or(serde_json::Value::String(payload)),
            headers,
        })
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
