//! A small W3C WebDriver client: JSON over HTTP to a `chromedriver` on a
//! loopback port, through the harness's own HTTP client (no browser
//! automation crate). Just what the portal's browser test needs: a session
//! of headless Chromium, navigate, find by CSS, click, type, read text and
//! attributes, run a script, take a screenshot.
//!
//! Chromium and chromedriver come from Debian's packages; when either is
//! missing, [`Chromedriver::start`] runs the project's
//! `scripts/install-chromium` first, so the test works on a fresh machine.
use crate::process::{free_port, wait_until};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian puts them.
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The key a WebDriver element reference is sent under (the spec's constant).
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Flags that work in a closed network: without the background-networking
/// ones Chromium keeps dialling out and the sandboxless container refuses.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// The project's installer, found from this crate's manifest.
fn installer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-chromium")
}

/// Chromium and chromedriver are there, or are installed by
/// `scripts/install-chromium` (which says why when it cannot).
pub fn ensure_installed() -> Result<(), String> {
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return Ok(());
    }
    let out = Command::new("sh")
        .arg(installer())
        .output()
        .map_err(|e| format!("running {}: {e}", installer().display()))?;
    if !out.status.success() {
        return Err(format!(
            "scripts/install-chromium failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// An answer of chromedriver: its status and JSON body.
struct Reply {
    status: u16,
    body: Value,
}

/// JSON over HTTP/1.1 to chromedriver. Its own few lines rather than the
/// harness's client: chromedriver keeps the connection open after
/// answering, so the body is read by its `Content-Length`, not to the end.
#[derive(Clone)]
struct Wire {
    addr: String,
}

impl Wire {
    fn get(&self, path: &str) -> Reply {
        self.request("GET", path, None)
    }

    fn post(&self, path: &str, body: &str) -> Reply {
        self.request("POST", path, Some(body))
    }

    /// One request on a fresh connection; a transport failure is status 0.
    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Reply {
        self.try_request(method, path, body)
            .unwrap_or_else(|e| Reply {
                status: 0,
                body: json!({"value": {"error": "transport", "message": e.to_string()}}),
            })
    }

    fn try_request(&self, method: &str, path: &str, body: Option<&str>) -> std::io::Result<Reply> {
        let mut s = TcpStream::connect(&self.addr)?;
        // A navigation waits for the page to load; a screenshot for its paint.
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let body = body.unwrap_or("");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )?;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut length = 0usize;
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut raw = vec![0u8; length];
        r.read_exact(&mut raw)?;
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Ok(Reply { status, body })
    }
}

/// A running chromedriver on a loopback port; killed when dropped.
pub struct Chromedriver {
    child: Child,
    api: Wire,
}

impl Chromedriver {
    /// Installs what is missing, starts chromedriver and waits until it is ready.
    pub fn start() -> Result<Chromedriver, String> {
        ensure_installed()?;
        let port = free_port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {CHROMEDRIVER}: {e}"))?;
        let driver = Chromedriver {
            child,
            api: Wire {
                addr: format!("127.0.0.1:{port}"),
            },
        };
        let ready = wait_until(Duration::from_secs(20), || {
            driver.api.get("/status").body["value"]["ready"] == true
        });
        if !ready {
            return Err(format!("chromedriver on port {port} never became ready"));
        }
        Ok(driver)
    }

    /// A fresh headless Chromium of `width` x `height`, its profile in
    /// `profile` (an empty directory: nothing carried over between runs).
    pub fn session(&self, profile: &Path, width: u32, height: u32) -> Result<Session, String> {
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push(format!("--window-size={width},{height}"));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let r = self.api.post("/session", &caps.to_string());
        let value = answer(&r, "new session")?;
        let id = value["sessionId"]
            .as_str()
            .ok_or_else(|| format!("new session: no sessionId in {value}"))?;
        Ok(Session {
            api: self.api.clone(),
            base: format!("/session/{id}"),
        })
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `value` of a WebDriver answer, or its error as a sentence.
fn answer(r: &Reply, what: &str) -> Result<Value, String> {
    let value = r.body["value"].clone();
    if r.status == 200 {
        return Ok(value);
    }
    Err(format!(
        "{what}: HTTP {} {}: {}",
        r.status,
        value["error"].as_str().unwrap_or("?"),
        value["message"].as_str().unwrap_or(&r.body.to_string())
    ))
}

/// An element of the page, by its WebDriver reference.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Element {
    /// The element as an argument of [`Session::execute`] (`arguments[i]`).
    pub fn as_argument(&self) -> Value {
        json!({ ELEMENT: self.0 })
    }
}

/// One browser session; deleted (the browser closed) when dropped.
pub struct Session {
    api: Wire,
    base: String,
}

impl Session {
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Value, String> {
        let body = body.map(|b| b.to_string());
        let r = self
            .api
            .request(method, &format!("{}{path}", self.base), body.as_deref());
        answer(&r, what)
    }

    /// Loads `url` (returns once the page has loaded).
    pub fn navigate(&self, url: &str) -> Result<(), String> {
        self.call("POST", "/url", Some(json!({"url": url})), url)
            .map(drop)
    }

    /// The address the browser is at.
    pub fn current_url(&self) -> Result<String, String> {
        let v = self.call("GET", "/url", None, "current url")?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// The first element matching `css`, if any (no waiting).
    pub fn find(&self, css: &str) -> Result<Option<Element>, String> {
        let body = json!({"using": "css selector", "value": css});
        let r = self
            .api
            .post(&format!("{}/element", self.base), &body.to_string());
        if r.status == 404 && r.body["value"]["error"] == "no such element" {
            return Ok(None);
        }
        let v = answer(&r, css)?;
        Ok(v[ELEMENT].as_str().map(|id| Element(id.to_string())))
    }

    /// Every element matching `css`.
    pub fn find_all(&self, css: &str) -> Result<Vec<Element>, String> {
        let body = json!({"using": "css selector", "value": css});
        let v = self.call("POST", "/elements", Some(body), css)?;
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|id| Element(id.to_string())))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The first element matching `css`, waiting up to `timeout` for it.
    pub fn wait_for(&self, css: &str, timeout: Duration) -> Result<Element, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.find(css)? {
                return Ok(e);
            }
            if Instant::now() > deadline {
                let url = self.current_url().unwrap_or_default();
                return Err(format!("no {css} on {url} after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits up to `timeout` until `check` holds of the text of `css`.
    pub fn wait_text(
        &self,
        css: &str,
        timeout: Duration,
        check: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        loop {
            if let Some(e) = self.find(css)? {
                // The live refresh may swap the element out between the two calls.
                last = self.text(&e).unwrap_or_default();
                if check(&last) {
                    return Ok(last);
                }
            }
            if Instant::now() > deadline {
                return Err(format!("{css} still reads {last:?} after {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    pub fn click(&self, e: &Element) -> Result<(), String> {
        self.call(
            "POST",
            &format!("/element/{}/click", e.0),
            Some(json!({})),
            "click",
        )
        .map(drop)
    }

    /// Empties an input or textarea.
    pub fn clear(&self, e: &Element) -> Result<(), String> {
        self.call(
            "POST",
            &format!("/element/{}/clear", e.0),
            Some(json!({})),
            "clear",
        )
        .map(drop)
    }

    /// Types `text` into an element, as keystrokes.
    pub fn send_keys(&self, e: &Element, text: &str) -> Result<(), String> {
        let body = json!({"text": text});
        self.call(
            "POST",
            &format!("/element/{}/value", e.0),
            Some(body),
            "send keys",
        )
        .map(drop)
    }

    /// An element's rendered text.
    pub fn text(&self, e: &Element) -> Result<String, String> {
        let v = self.call("GET", &format!("/element/{}/text", e.0), None, "text")?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// An element's attribute (`None`: it has none).
    pub fn attribute(&self, e: &Element, name: &str) -> Result<Option<String>, String> {
        let v = self.call(
            "GET",
            &format!("/element/{}/attribute/{name}", e.0),
            None,
            name,
        )?;
        Ok(v.as_str().map(str::to_string))
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value, String> {
        let body = json!({"script": script, "args": args});
        self.call("POST", "/execute/sync", Some(body), "execute")
    }

    /// Resizes the window so that the page's viewport is `width` x
    /// `height` (the window's own frame is measured, not guessed).
    pub fn set_viewport(&self, width: u32, height: u32) -> Result<(), String> {
        let inner = self.execute(
            "return [window.innerWidth, window.innerHeight, window.outerWidth, window.outerHeight];",
            vec![],
        )?;
        let at = |i: usize| inner[i].as_i64().unwrap_or(0);
        let (w, h) = (width as i64 + at(2) - at(0), height as i64 + at(3) - at(1));
        let body = json!({"width": w, "height": h});
        self.call("POST", "/window/rect", Some(body), "window rect")
            .map(drop)
    }

    /// The viewport as a PNG.
    pub fn screenshot(&self) -> Result<Vec<u8>, String> {
        let v = self.call("GET", "/screenshot", None, "screenshot")?;
        decode_base64(v.as_str().unwrap_or_default())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.api.request("DELETE", &self.base, None);
    }
}

/// Standard base64 (what WebDriver sends screenshots as), padding optional.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    fn sextet(c: u8) -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some((c - b'A') as u32),
            b'a'..=b'z' => Some((c - b'a') as u32 + 26),
            b'0'..=b'9' => Some((c - b'0') as u32 + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let digits: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            let v = sextet(*c).ok_or_else(|| format!("not base64: byte {c:#x}"))?;
            n |= v << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::decode_base64;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        // (encoded, decoded): 3 bytes per 4 digits; 2 digits = 1 byte, 3 = 2.
        let rows: [(&str, &[u8]); 5] = [
            ("", b""),
            ("TWFu", b"Man"),
            ("TWE=", b"Ma"),
            ("TQ==", b"M"),
            ("iVBORw0KGgo", b"\x89PNG\r\n\x1a\n"),
        ];
        for (enc, want) in rows {
            assert_eq!(decode_base64(enc).as_deref(), Ok(want), "{enc}");
        }
        assert!(decode_base64("a*b=").is_err());
    }
}
