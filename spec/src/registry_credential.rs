//! A tenant's credentials for one image registry. Set through the API, kept
//! in the control plane's store, and handed to an agent only inside the start
//! command of that tenant's container task whose image comes from that
//! registry, as a podman auth file's JSON. The password is never shown back:
//! not in a view, a log line, an event or an error; this type's `Debug`
//! leaves it out.
use crate::error::{SpecError, SpecErrorKind as K};
use serde::{Deserialize, Serialize};

/// Longest user name accepted.
pub const MAX_USERNAME_LEN: usize = 256;
/// Longest password or token accepted (registry tokens run to a few KB).
pub const MAX_PASSWORD_LEN: usize = 8192;

/// One stored credential.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryCredential {
    pub tenant: String,
    /// Registry host, with `:port` where it has one (`registry.internal`).
    pub registry: String,
    pub username: String,
    pub password: String,
    /// When it was set, Unix ms.
    pub set_ms: u64,
}

impl std::fmt::Debug for RegistryCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryCredential")
            .field("tenant", &self.tenant)
            .field("registry", &self.registry)
            .field("set_ms", &self.set_ms)
            .finish_non_exhaustive()
    }
}

impl RegistryCredential {
    /// The podman/docker auth file for this registry alone:
    /// `{"auths":{"<registry>":{"auth":"<base64 of user:password>"}}}`.
    pub fn auth_file_json(&self) -> String {
        let auth = base64(format!("{}:{}", self.username, self.password).as_bytes());
        serde_json::json!({ "auths": { self.registry.as_str(): { "auth": auth } } }).to_string()
    }
}

/// The body of `PUT /v1/tenants/{tenant}/registry-credentials/{registry}`.
#[derive(Clone, PartialEq, Eq)]
pub struct NewRegistryCredential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for NewRegistryCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewRegistryCredential")
            .finish_non_exhaustive()
    }
}

/// Reads `{"username": "...", "password": "..."}`. Every error names the
/// field and never quotes a value, so a password sent in the wrong place
/// is not written back into an answer or a log.
pub fn parse_new_credential(body: &[u8]) -> Result<NewRegistryCredential, SpecError> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|_| {
        SpecError::new(
            K::MalformedJson,
            ".",
            "the body is not valid JSON; send {\"username\": ..., \"password\": ...}",
        )
    })?;
    let Some(obj) = value.as_object() else {
        return Err(SpecError::new(
            K::WrongType,
            ".",
            "the body must be a JSON object {\"username\": ..., \"password\": ...}",
        ));
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "username" | "password"))
    {
        let shown: String = k.chars().take(40).collect();
        return Err(SpecError::new(
            K::UnknownField,
            shown,
            "unknown field; the body has username and password only",
        ));
    }
    let text = |name: &str| match obj.get(name) {
        None => Err(SpecError::new(
            K::MissingField,
            name,
            format!("{name} is required"),
        )),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(SpecError::new(
            K::WrongType,
            name,
            format!("{name} must be a string"),
        )),
    };
    let username = text("username")?;
    let password = text("password")?;
    if username.is_empty() || username.len() > MAX_USERNAME_LEN {
        return Err(SpecError::new(
            K::OutOfRange,
            "username",
            format!("the user name must be 1 to {MAX_USERNAME_LEN} characters"),
        ));
    }
    if username.contains(':') || username.chars().any(char::is_control) {
        return Err(SpecError::new(
            K::BadFormat,
            "username",
            "the user name may not hold ':' or control characters (the registry reads user:password)",
        ));
    }
    if password.is_empty() || password.len() > MAX_PASSWORD_LEN {
        return Err(SpecError::new(
            K::OutOfRange,
            "password",
            format!("the password must be 1 to {MAX_PASSWORD_LEN} characters"),
        ));
    }
    if password.chars().any(char::is_control) {
        return Err(SpecError::new(
            K::BadFormat,
            "password",
            "the password may not hold control characters",
        ));
    }
    Ok(NewRegistryCredential { username, password })
}

/// Checks the `{registry}` of the path: a host name with an optional port,
/// as an image reference names it.
pub fn check_registry_name(registry: &str) -> Result<(), SpecError> {
    crate::image_ref::check_registry(registry)
        .map(|_| ())
        .map_err(|why| SpecError::new(K::BadFormat, "registry", why))
}

/// Standard base64 with padding (RFC 4648), as auth files hold it.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn the_auth_file_names_the_one_registry() {
        let c = RegistryCredential {
            tenant: "acme".into(),
            registry: "127.0.0.1:5555".into(),
            username: "bot".into(),
            password: "s3cret:x".into(),
            set_ms: 1,
        };
        let v: serde_json::Value = serde_json::from_str(&c.auth_file_json()).unwrap();
        assert_eq!(
            v["auths"]["127.0.0.1:5555"]["auth"],
            base64(b"bot:s3cret:x")
        );
        assert_eq!(v["auths"].as_object().map(|m| m.len()), Some(1));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("bot"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_body_names_the_field_and_never_quotes_the_password() {
        let secret = "hunter2-secret";
        let cases = [
            (
                format!(r#"{{"username":"u","password":{secret:?},"x":1}}"#),
                "x",
            ),
            (r#"{"username":"u"}"#.to_string(), "password"),
            (r#"{"username":"u","password":7}"#.to_string(), "password"),
            (
                format!(r#"{{"username":"u:v","password":{secret:?}}}"#),
                "username",
            ),
            (
                format!(r#"{{"username":"","password":{secret:?}}}"#),
                "username",
            ),
            (r#"{"username":"u","password":""}"#.to_string(), "password"),
            (format!(r#"{{"username":"u","password":"{secret}"#), "."),
            (format!("[{secret:?}]"), "."),
        ];
        for (body, field) in cases {
            let e = parse_new_credential(body.as_bytes()).unwrap_err();
            assert_eq!(e.field, field, "{body}");
            assert!(!e.to_string().contains(secret), "{e}");
        }
        let ok = parse_new_credential(br#"{"username":"u","password":"p:w"}"#).unwrap();
        assert_eq!((ok.username.as_str(), ok.password.as_str()), ("u", "p:w"));
    }
}
