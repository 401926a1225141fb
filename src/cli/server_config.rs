//! Loading [`ServerConfig`]: defaults <- TOML file <- `CALDERA_*` environment
//! <- command-line flags, each layer overriding the one before.
//!
//! The environment is filtered to the config's own keys because `CALDERA_*`
//! also carries client settings (`CALDERA_SERVER`, `CALDERA_TOKEN`,
//! `CALDERA_LOG`) that are not server configuration. A file, in contrast, is
//! written for the server alone, so an unknown key there is an error: it is
//! almost always a typo that would otherwise be ignored silently.
use super::CliError;
use caldera_actors::config::ServerConfig;
use config::{Config, File, FileFormat};
use std::path::{Path, PathBuf};

/// Prefix of the environment variables that override configuration keys.
const ENV_PREFIX: &str = "CALDERA_";

/// Values given on the command line; they win over everything else.
#[derive(Debug, Clone, Default)]
pub struct FlagOverrides {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
}

/// Loads the configuration from `file` (if any), the environment variables
/// `env` (pass `std::env::vars()`) and the flags, then validates it.
pub fn load(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &FlagOverrides,
) -> Result<ServerConfig, CliError> {
    let known = known_keys();
    let mut builder = Config::builder();
    if let Some(path) = file {
        check_file_keys(path, &known)?;
        builder = builder.add_source(File::from(path).format(FileFormat::Toml).required(true));
    }
    for (name, value) in env {
        if let Some(key) = env_key(&name).filter(|k| known.contains(k)) {
            builder = set(builder, &key, value)?;
        }
    }
    if let Some(listen) = &flags.listen {
        builder = set(builder, "listen", listen.clone())?;
    }
    if let Some(dir) = &flags.data_dir {
        builder = set(builder, "data-dir", dir.to_string_lossy().into_owned())?;
    }
    let config: ServerConfig = builder
        .build()
        .and_then(Config::try_deserialize)
        .map_err(|e| CliError::Usage(format!("configuration: {e}")))?;
    config
        .validate()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(config)
}

/// The configuration keys, taken from the struct itself so that a key added
/// to [`ServerConfig`] is accepted here without touching this file.
pub fn known_keys() -> Vec<String> {
    match serde_json::to_value(ServerConfig::default()) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// `CALDERA_NODE_TIMEOUT_MS` -> `node-timeout-ms`; `None` without the prefix.
fn env_key(name: &str) -> Option<String> {
    let rest = name.strip_prefix(ENV_PREFIX)?;
    (!rest.is_empty()).then(|| rest.to_ascii_lowercase().replace('_', "-"))
}

fn set(
    builder: config::ConfigBuilder<config::builder::DefaultState>,
    key: &str,
    value: String,
) -> Result<config::ConfigBuilder<config::builder::DefaultState>, CliError> {
    builder
        .set_override(key, value)
        .map_err(|e| CliError::Usage(format!("configuration {key}: {e}")))
}

/// Refuses a file with a key the server does not know, naming the key.
fn check_file_keys(path: &Path, known: &[String]) -> Result<(), CliError> {
    let parsed = Config::builder()
        .add_source(File::from(path).format(FileFormat::Toml).required(true))
        .build()
        .map_err(|e| CliError::Usage(format!("config file {}: {e}", path.display())))?;
    let table = parsed
        .try_deserialize::<std::collections::HashMap<String, config::Value>>()
        .map_err(|e| CliError::Usage(format!("config file {}: {e}", path.display())))?;
    let mut unknown: Vec<&String> = table.keys().filter(|k| !known.contains(k)).collect();
    unknown.sort();
    match unknown.first() {
        None => Ok(()),
        Some(key) => Err(CliError::Usage(format!(
            "config file {}: unknown key `{key}` (known keys: {})",
            path.display(),
            known.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TOML file in the temp directory, removed when dropped (no tempfile
    /// crate: the binary package keeps its dependencies lean).
    struct TempToml(PathBuf);

    impl TempToml {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempToml {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn file(text: &str) -> TempToml {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "caldera-config-test-{}-{n}.toml",
            std::process::id()
        ));
        std::fs::write(&path, text).expect("write temp file");
        TempToml(path)
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn nothing_given_is_the_defaults() {
        let c = load(None, env(&[]), &FlagOverrides::default()).unwrap();
        assert_eq!(c, ServerConfig::default());
    }

    #[test]
    fn file_then_environment_then_flags_each_override_the_one_before() {
        let f = file("listen = \"0.0.0.0:9000\"\nnode-timeout-ms = 6000\ncache-mb = 32\ndata-dir = \"/from/file\"\n");
        let vars = env(&[
            ("CALDERA_NODE_TIMEOUT_MS", "8000"),
            ("CALDERA_LISTEN", "0.0.0.0:9100"),
            ("CALDERA_OPERATOR_TOKEN", "operator-token-from-env"),
        ]);
        let flags = FlagOverrides {
            listen: Some("127.0.0.1:9200".into()),
            data_dir: None,
        };
        let c = load(Some(f.path()), vars, &flags).unwrap();
        assert_eq!(c.cache_mb, 32, "file over defaults");
        assert_eq!(
            c.data_dir,
            PathBuf::from("/from/file"),
            "file over defaults"
        );
        assert_eq!(c.node_timeout_ms, 8000, "environment over file");
        assert_eq!(c.operator_token.as_deref(), Some("operator-token-from-env"));
        assert_eq!(c.listen, "127.0.0.1:9200", "flags over environment");
        assert_eq!(
            c.heartbeat_interval_ms,
            ServerConfig::default().heartbeat_interval_ms
        );
    }

    #[test]
    fn client_variables_in_the_environment_are_not_configuration() {
        let vars = env(&[
            ("CALDERA_SERVER", "http://x"),
            ("CALDERA_TOKEN", "t"),
            ("CALDERA_LOG", "debug"),
            ("PATH", "/bin"),
        ]);
        assert_eq!(
            load(None, vars, &FlagOverrides::default()).unwrap(),
            ServerConfig::default()
        );
    }

    #[test]
    fn an_unknown_key_in_the_file_is_an_error_naming_it() {
        let f = file("listen = \"127.0.0.1:1\"\nnode-timout-ms = 6000\n");
        let err = load(Some(f.path()), env(&[]), &FlagOverrides::default()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string().contains("unknown key `node-timout-ms`"),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_or_an_invalid_one_is_refused() {
        let err = load(
            None,
            env(&[("CALDERA_CACHE_MB", "lots")]),
            &FlagOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("cache-mb"), "{err}");
        let err = load(
            None,
            env(&[("CALDERA_NODE_TIMEOUT_MS", "100")]),
            &FlagOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("node-timeout-ms"), "{err}");
    }

    #[test]
    fn container_rules_read_from_a_file_or_the_environment() {
        let f = file(
            "require-images = true\ndata-volumes = [{ name = \"datasets\", host-path = \"/srv/datasets\", tenants = [\"*\"] }, { name = \"out\", host-path = \"/srv/out\", tenants = [\"acme\", \"Beta\"], read-write = true }]\n",
        );
        let from_file = load(Some(f.path()), env(&[]), &FlagOverrides::default()).unwrap();
        assert!(from_file.require_images);
        let from_env = load(
            None,
            env(&[
                ("CALDERA_REQUIRE_IMAGES", "true"),
                (
                    "CALDERA_DATA_VOLUMES",
                    "datasets=/srv/datasets:*, out=/srv/out:acme|Beta:rw",
                ),
            ]),
            &FlagOverrides::default(),
        )
        .unwrap();
        assert_eq!(from_file, from_env);
        assert_eq!(from_env.data_volumes.0[1].tenants, ["acme", "Beta"]);
        assert!(from_env.data_volumes.0[1].read_write);
        let err = load(
            None,
            env(&[("CALDERA_DATA_VOLUMES", "datasets=/srv/d")]),
            &FlagOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("NAME=HOST_PATH:TENANTS"), "{err}");
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let err = load(
            Some(Path::new("/no/such/caldera.toml")),
            env(&[]),
            &FlagOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/no/such/caldera.toml"), "{err}");
    }
}
