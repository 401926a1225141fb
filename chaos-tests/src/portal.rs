//! A browser's part in the portal tests, over the real socket: it keeps the
//! cookies the server sets (as a browser would, by name; `Max-Age=0`
//! deletes one), sends forms urlencoded, and reads values out of the HTML.
use crate::http::{Api, Reply};
use std::collections::BTreeMap;

/// One browser: its cookies for one server.
#[derive(Debug, Clone)]
pub struct Browser {
    api: Api,
    pub cookies: BTreeMap<String, String>,
}

/// `s` percent-encoded for a form body.
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The value of the first `attr="…"` after `marker` in `html`, unescaped
/// as maud escapes it.
pub fn value_after(html: &str, marker: &str, attr: &str) -> Option<String> {
    let at = html.find(marker)? + marker.len();
    let rest = &html[at..];
    let key = format!("{attr}=\"");
    let start = rest.find(&key)? + key.len();
    let end = start + rest[start..].find('"')?;
    Some(
        rest[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

impl Browser {
    /// A browser with no cookies, for the server at `addr`.
    pub fn new(addr: &str) -> Browser {
        Browser {
            api: Api::new(addr, None),
            cookies: BTreeMap::new(),
        }
    }

    /// A browser logged in with `token` through the login form.
    pub fn logged_in(addr: &str, token: &str) -> Browser {
        let mut b = Browser::new(addr);
        let r = b.login(token);
        assert_eq!(r.status, 303, "login: {}", text(&r));
        b
    }

    /// Opens the login page and sends its form with `token`.
    pub fn login(&mut self, token: &str) -> Reply {
        let page = self.get("/login");
        assert_eq!(page.status, 200, "{}", text(&page));
        let nonce = value_after(text(&page), "name=\"login_nonce\"", "value").unwrap_or_default();
        self.post_form("/login", &[("login_nonce", &nonce), ("token", token)])
    }

    fn cookie_header(&self) -> String {
        if self.cookies.is_empty() {
            return String::new();
        }
        let pairs: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("Cookie: {}\r\n", pairs.join("; "))
    }

    /// Keeps what `r`'s `Set-Cookie` headers set.
    fn keep_cookies(&mut self, r: &Reply) {
        for (name, value) in &r.headers {
            if name != "set-cookie" {
                continue;
            }
            let Some((pair, attrs)) = value.split_once(';').or(Some((value.as_str(), ""))) else {
                continue;
            };
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            if attrs.contains("Max-Age=0") || v.is_empty() {
                self.cookies.remove(k.trim());
            } else {
                self.cookies
                    .insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }

    /// GET `path` with the cookies.
    pub fn get(&mut self, path: &str) -> Reply {
        let r = self.api.send("GET", path, None, &self.cookie_header());
        self.keep_cookies(&r);
        r
    }

    /// POST `fields` urlencoded to `path` with the cookies.
    pub fn post_form(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let body: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
            .collect();
        let extra = format!(
            "{}Content-Type: application/x-www-form-urlencoded\r\n",
            self.cookie_header()
        );
        let r = self.api.send("POST", path, Some(&body.join("&")), &extra);
        self.keep_cookies(&r);
        r
    }

    /// The CSRF token the page at `path` puts in its forms.
    pub fn csrf(&mut self, path: &str) -> String {
        let page = self.get(path);
        assert_eq!(page.status, 200, "{path}: {}", text(&page));
        value_after(text(&page), "name=\"csrf\"", "value").unwrap_or_default()
    }
}

/// A reply's body as text (an HTML page).
pub fn text(r: &Reply) -> &str {
    r.body.as_str().unwrap_or_default()
}
