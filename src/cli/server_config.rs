//! Loading [`ServerConfig`]: defaults <- TOML file <- `CALDERA_*` environment
//! <- command-line flags, each layer overriding the one before.
//!
//! Keys live in sections (`[scheduling] max-image-pulls = 2`, or
//! `CALDERA_SCHEDULING__MAX_IMAGE_PULLS=2`); what each name means, former
//! flat names included, is decided by `caldera_actors::config::legacy`, and
//! this file only reads the sources and lays them over each other.
//!
//! The environment is filtered to the config's own keys because `CALDERA_*`
//! also carries client settings (`CALDERA_SERVER`, `CALDERA_TOKEN`,
//! `CALDERA_LOG`) that are not server configuration. A file, in contrast, is
//! written for the server alone, so an unknown key there is an error: it is
//! almost always a typo that would otherwise be ignored silently.
use super::CliError;
use caldera_actors::config::legacy::{self, Deprecation, FileEntry, FilePlacement};
use caldera_actors::config::ServerConfig;
use config::{Config, File, FileFormat, Map, Source, Value, ValueKind};
use std::path::{Path, PathBuf};

/// Values given on the command line; they win over everything else.
#[derive(Debug, Clone, Default)]
pub struct FlagOverrides {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
}

/// A loaded, validated configuration and the former names it was given by.
#[derive(Debug)]
pub struct Loaded {
    pub config: ServerConfig,
    /// One per former flat key or variable used: logged at start, each
    /// naming the key to use instead.
    pub deprecations: Vec<Deprecation>,
}

impl Loaded {
    /// Logs the deprecations (call once logging is set up).
    pub fn warn_deprecations(&self) {
        for d in &self.deprecations {
            tracing::warn!("{d}");
        }
    }
}

/// Loads the configuration from `file` (if any), the environment variables
/// `env` (pass `std::env::vars()`) and the flags, then validates it.
pub fn load(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    flags: &FlagOverrides,
) -> Result<Loaded, CliError> {
    let mut deprecations = Vec::new();
    let mut builder = Config::builder();
    if let Some(path) = file {
        let (sectioned, moved) = read_file(path)?;
        deprecations.extend(moved);
        builder = builder.add_source(sectioned);
    }
    let vars = legacy::plan_env(env).map_err(|e| CliError::Usage(format!("configuration: {e}")))?;
    for var in vars {
        builder = set(builder, &var.key.path(), var.value)?;
        deprecations.extend(var.deprecation);
    }
    if let Some(listen) = &flags.listen {
        builder = set(builder, "server.listen", listen.clone())?;
    }
    if let Some(dir) = &flags.data_dir {
        builder = set(
            builder,
            "storage.data-dir",
            dir.to_string_lossy().into_owned(),
        )?;
    }
    let config: ServerConfig = builder
        .build()
        .and_then(Config::try_deserialize)
        .map_err(|e| CliError::Usage(format!("configuration: {e}")))?;
    config
        .validate()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(Loaded {
        config,
        deprecations,
    })
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

/// A file's values with every former flat key moved into its section.
#[derive(Debug, Clone)]
struct Sectioned(Map<String, Value>);

impl Source for Sectioned {
    fn clone_into_box(&self) -> Box<dyn Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<Map<String, Value>, config::ConfigError> {
        Ok(self.0.clone())
    }
}

/// Reads the file and moves its former flat keys into their sections,
/// refusing unknown keys and a former key set alongside its new one.
fn read_file(path: &Path) -> Result<(Sectioned, Vec<Deprecation>), CliError> {
    let refused =
        |e: &dyn std::fmt::Display| CliError::Usage(format!("config file {}: {e}", path.display()));
    let mut top: Map<String, Value> = Config::builder()
        .add_source(File::from(path).format(FileFormat::Toml).required(true))
        .build()
        .and_then(Config::try_deserialize)
        .map_err(|e| refused(&e))?;
    let mut entries: Vec<FileEntry> = top
        .iter()
        .map(|(name, value)| {
            let keys = match &value.kind {
                ValueKind::Table(t) => Some(t.keys().cloned().collect()),
                _ => None,
            };
            (name.clone(), keys)
        })
        .collect();
    // The first problem named is the same whatever order the map keeps.
    entries.sort();
    let plan = legacy::plan_file(&entries).map_err(|e| refused(&e))?;
    let mut sectioned = Map::new();
    let mut moved = Vec::new();
    for placement in plan {
        match placement {
            FilePlacement::Section(name) => {
                if let Some(value) = top.remove(&name) {
                    merge(&mut sectioned, &name, value);
                }
            }
            FilePlacement::Moved(d) => {
                if let Some(value) = top.remove(&d.old) {
                    let mut one = Map::new();
                    one.insert(d.key.name(), value);
                    merge(
                        &mut sectioned,
                        d.key.section,
                        Value::new(None, ValueKind::Table(one)),
                    );
                }
                moved.push(d);
            }
        }
    }
    Ok((Sectioned(sectioned), moved))
}

/// Adds `table`'s keys to section `name` of `into`.
fn merge(into: &mut Map<String, Value>, name: &str, table: Value) {
    let ValueKind::Table(keys) = table.kind else {
        return;
    };
    let section = into
        .entry(name.to_string())
        .or_insert_with(|| Value::new(None, ValueKind::Table(Map::new())));
    if let ValueKind::Table(existing) = &mut section.kind {
        existing.extend(keys);
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

    fn load_ok(file: Option<&Path>, vars: Vec<(String, String)>) -> Loaded {
        load(file, vars, &FlagOverrides::default()).unwrap()
    }

    #[test]
    fn nothing_given_is_the_defaults() {
        let loaded = load_ok(None, env(&[]));
        assert_eq!(loaded.config, ServerConfig::default());
        assert!(loaded.deprecations.is_empty());
    }

    #[test]
    fn file_then_environment_then_flags_each_override_the_one_before() {
        let f = file(
            "[server]\nlisten = \"0.0.0.0:9000\"\n[nodes]\ntimeout-ms = 6000\n\
             [storage]\ncache-mb = 32\ndata-dir = \"/from/file\"\n",
        );
        let vars = env(&[
            ("CALDERA_NODES__TIMEOUT_MS", "8000"),
            ("CALDERA_SERVER__LISTEN", "0.0.0.0:9100"),
            ("CALDERA_SERVER__OPERATOR_TOKEN", "operator-token-from-env"),
        ]);
        let flags = FlagOverrides {
            listen: Some("127.0.0.1:9200".into()),
            data_dir: None,
        };
        let c = load(Some(f.path()), vars, &flags).unwrap().config;
        assert_eq!(c.storage.cache_mb, 32, "file over defaults");
        assert_eq!(
            c.storage.data_dir,
            PathBuf::from("/from/file"),
            "file over defaults"
        );
        assert_eq!(c.nodes.timeout_ms, 8000, "environment over file");
        assert_eq!(
            c.server.operator_token.as_deref(),
            Some("operator-token-from-env")
        );
        assert_eq!(c.server.listen, "127.0.0.1:9200", "flags over environment");
        assert_eq!(
            c.nodes.heartbeat_interval_ms,
            ServerConfig::default().nodes.heartbeat_interval_ms
        );
    }

    #[test]
    fn sectioned_keys_load_from_a_file() {
        let f = file(
            "[scheduling]\nmax-image-pulls = 5\nplacement-policy = \"fgd\"\n\
             [webhooks]\nretry-max-ms = 60000\n[portal]\nlogins-per-minute = 7\n\
             [chargeback]\nprice-currency = \"EUR\"\n",
        );
        let loaded = load_ok(Some(f.path()), env(&[]));
        let c = &loaded.config;
        assert_eq!(c.scheduling.max_image_pulls, 5);
        assert_eq!(c.scheduling.placement_policy, "fgd");
        assert_eq!(c.webhooks.retry_max_ms, 60_000);
        assert_eq!(c.portal.logins_per_minute, 7);
        assert_eq!(c.chargeback.price_currency, "EUR");
        assert!(loaded.deprecations.is_empty());
    }

    #[test]
    fn former_flat_keys_still_load_and_each_warns_naming_its_new_key() {
        let f = file(
            "max-image-pulls = 3\nwebhook-retry-max-ms = 60000\n[nodes]\nstop-grace-ms = 500\n",
        );
        let vars = env(&[("CALDERA_PORTAL_LOGINS_PER_MINUTE", "9")]);
        let loaded = load_ok(Some(f.path()), vars);
        let c = &loaded.config;
        assert_eq!(c.scheduling.max_image_pulls, 3);
        assert_eq!(c.webhooks.retry_max_ms, 60_000);
        assert_eq!(c.nodes.stop_grace_ms, 500, "a section beside former keys");
        assert_eq!(c.portal.logins_per_minute, 9);
        let said: Vec<String> = loaded.deprecations.iter().map(|d| d.to_string()).collect();
        assert_eq!(
            said,
            [
                "config key \"max-image-pulls\" is deprecated: use [scheduling] max-image-pulls",
                "config key \"webhook-retry-max-ms\" is deprecated: use [webhooks] retry-max-ms",
                "environment variable CALDERA_PORTAL_LOGINS_PER_MINUTE is deprecated: \
                 use CALDERA_PORTAL__LOGINS_PER_MINUTE",
            ]
        );
    }

    #[test]
    fn a_file_setting_a_former_key_and_its_new_one_is_refused_naming_both() {
        let f = file("max-image-pulls = 3\n[scheduling]\nmax-image-pulls = 4\n");
        let err = load(Some(f.path()), env(&[]), &FlagOverrides::default()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(
            text.contains(
                "config key \"max-image-pulls\" and [scheduling] max-image-pulls are both set"
            ),
            "{text}"
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
        assert_eq!(load_ok(None, vars).config, ServerConfig::default());
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
        let f = file("[nodes]\ntimeout-msec = 6000\n");
        let err = load(Some(f.path()), env(&[]), &FlagOverrides::default()).unwrap_err();
        assert!(
            err.to_string().contains("unknown key `nodes.timeout-msec`"),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_or_an_invalid_one_is_refused_naming_the_key() {
        let err = load(
            None,
            env(&[("CALDERA_STORAGE__CACHE_MB", "lots")]),
            &FlagOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("storage.cache-mb"), "{err}");
        let err = load(
            None,
            env(&[("CALDERA_NODE_TIMEOUT_MS", "100")]),
            &FlagOverrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("nodes.timeout-ms"), "{err}");
    }

    #[test]
    fn container_rules_read_from_a_file_or_the_environment() {
        let f = file(
            "[limits]\nrequire-images = true\ndata-volumes = [{ name = \"datasets\", host-path = \"/srv/datasets\", tenants = [\"*\"] }, { name = \"out\", host-path = \"/srv/out\", tenants = [\"acme\", \"Beta\"], read-write = true }]\n",
        );
        let from_file = load_ok(Some(f.path()), env(&[])).config;
        assert!(from_file.limits.require_images);
        let from_env = load_ok(
            None,
            env(&[
                ("CALDERA_LIMITS__REQUIRE_IMAGES", "true"),
                (
                    "CALDERA_LIMITS__DATA_VOLUMES",
                    "datasets=/srv/datasets:*, out=/srv/out:acme|Beta:rw",
                ),
            ]),
        )
        .config;
        assert_eq!(from_file, from_env);
        assert_eq!(from_env.limits.data_volumes.0[1].tenants, ["acme", "Beta"]);
        assert!(from_env.limits.data_volumes.0[1].read_write);
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
