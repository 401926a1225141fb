//! Contexts: which server the CLI talks to and with which token, saved by
//! `caldera login` (and by `caldera up` for its local cluster), like a
//! kubeconfig. The file is `$CALDERA_CONTEXTS_FILE`, else
//! `$XDG_CONFIG_HOME/caldera/contexts.json`, else
//! `~/.config/caldera/contexts.json`; mode 0600, as it holds tokens.
//!
//! A command takes its server and token from, in order: `--server` /
//! `--token` (or `CALDERA_SERVER` / `CALDERA_TOKEN`), then the context named
//! by `--context` (or `CALDERA_CONTEXT`), else the current one, then the
//! default server `http://127.0.0.1:7070` without a token.
use super::CliError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a command goes when nothing names a server.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7070";

/// One saved server and token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The contexts file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contexts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, Context>,
}

/// The contexts file's path; None when there is no home to put it in.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("CALDERA_CONTEXTS_FILE") {
        return Some(PathBuf::from(p));
    }
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("caldera").join("contexts.json"))
}

impl Contexts {
    /// Reads `path`; a missing file is no contexts, a garbled one an error
    /// naming it (never silently replaced: it may hold other contexts).
    pub fn load(path: &Path) -> Result<Contexts, CliError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                CliError::Failed(format!(
                    "the contexts file {} cannot be read: {e}; fix or remove it",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Contexts::default()),
            Err(e) => Err(CliError::Failed(format!(
                "the contexts file {} cannot be read: {e}",
                path.display()
            ))),
        }
    }

    /// Writes `path` atomically (temporary file, fsync, rename), mode 0600.
    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let fail = |e: std::io::Error| CliError::Failed(format!("saving {}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| CliError::Failed(format!("encoding the contexts: {e}")))?;
        caldera_node::secret::write_private(path, &bytes).map_err(fail)
    }

    /// Adds or replaces `name` and makes it current.
    pub fn set(&mut self, name: &str, context: Context) {
        self.contexts.insert(name.to_string(), context);
        self.current = Some(name.to_string());
    }

    /// The context `name` (None: the current one). Naming one that does not
    /// exist is an error listing those that do.
    pub fn pick(&self, name: Option<&str>) -> Result<Option<&Context>, CliError> {
        let Some(name) = name.or(self.current.as_deref()) else {
            return Ok(None);
        };
        match self.contexts.get(name) {
            Some(c) => Ok(Some(c)),
            None => {
                let known: Vec<&str> = self.contexts.keys().map(String::as_str).collect();
                Err(CliError::Usage(format!(
                    "no context named {name:?}; saved: {}",
                    if known.is_empty() {
                        "none (run caldera login)".to_string()
                    } else {
                        known.join(", ")
                    }
                )))
            }
        }
    }
}

/// The server and token a command uses, from its flags and the contexts file.
pub fn resolve(
    server: Option<&str>,
    token: Option<&str>,
    context: Option<&str>,
) -> Result<(String, Option<String>), CliError> {
    let saved = match path() {
        Some(p) => Contexts::load(&p)?,
        None => Contexts::default(),
    };
    // A context named on purpose must exist even when flags cover it all.
    let picked = saved.pick(context)?;
    let server = server
        .map(str::to_string)
        .or_else(|| picked.map(|c| c.server.clone()))
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    let token = token
        .map(str::to_string)
        .or_else(|| picked.and_then(|c| c.token.clone()));
    Ok((server, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_round_trip_and_a_named_one_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/contexts.json");
        assert_eq!(Contexts::load(&p).unwrap(), Contexts::default());
        let mut c = Contexts::default();
        c.set(
            "prod",
            Context {
                server: "http://cp:7070".into(),
                token: Some("t".into()),
            },
        );
        c.save(&p).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = Contexts::load(&p).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.pick(None).unwrap().unwrap().server, "http://cp:7070");
        let e = back.pick(Some("staging")).unwrap_err().to_string();
        assert!(e.contains("staging") && e.contains("prod"), "{e}");
        std::fs::write(&p, b"{not json").unwrap();
        let e = Contexts::load(&p).unwrap_err().to_string();
        assert!(e.contains("contexts.json"), "{e}");
    }
}
