//! Model version commands: `caldera model register|list|show|prewarm|pin|deprecate|retire`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::table::{key_values, Table};
use super::CliError;
use caldera_spec::views::{ModelView, Prewarmed, VersionView};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// `caldera model ...`
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    #[command(subcommand)]
    pub action: ModelAction,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// What to do with model versions.
#[derive(clap::Subcommand, Debug)]
pub enum ModelAction {
    /// Register a version: its weights' uri, size and SHA-256, or a local
    /// file (`--file`) whose size and SHA-256 are computed here.
    Register(RegisterArgs),
    /// List models and their versions.
    List,
    /// Show a model's versions, or one version (NAME:VERSION) with its copies.
    Show(ShowArgs),
    /// Warm caches ahead of a rollout: named nodes, or N healthy nodes without a copy.
    Prewarm(PrewarmArgs),
    /// Pin (or with --off unpin) a version's cached copies.
    Pin(PinArgs),
    /// Flag a version deprecated (still usable; submissions naming it warn).
    Deprecate(ShowArgs),
    /// Retire a version (operator): no new tasks; retired and evicted from
    /// every cache once no task uses it.
    Retire(RetireArgs),
}

/// `caldera model retire NAME:VERSION [--replace-with NAME:VERSION]`
#[derive(clap::Args, Debug)]
pub struct RetireArgs {
    /// NAME:VERSION
    pub model: String,
    /// The version the services still on it move to.
    #[arg(long, value_name = "NAME:VERSION")]
    pub replace_with: Option<String>,
}

/// `caldera model register (NAME:VERSION | --name N --version V)
/// (--uri U --size-bytes S --sha256 H | --file PATH | --from-task TASK [--path FILE])`
#[derive(clap::Args, Debug)]
pub struct RegisterArgs {
    /// NAME:VERSION (or --name and --version).
    #[arg(conflicts_with_all = ["name", "version"])]
    pub model: Option<String>,
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub version: Option<String>,
    /// Register a task's checkpoint (its latest, or --path): the control
    /// plane computes its size and SHA-256.
    #[arg(long, value_name = "TASK", conflicts_with_all = ["uri", "size_bytes", "sha256", "file"])]
    pub from_task: Option<String>,
    /// With --from-task: a file in the task's checkpoint directory.
    #[arg(long, requires = "from_task")]
    pub path: Option<String>,
    /// With --from-task and the operator token: the task's tenant.
    #[arg(long, requires = "from_task")]
    pub tenant: Option<String>,
    /// `file:///abs/path` or `http(s)://...`.
    #[arg(long, conflicts_with = "file")]
    pub uri: Option<String>,
    #[arg(long, conflicts_with = "file")]
    pub size_bytes: Option<u64>,
    /// 64 lowercase hex digits.
    #[arg(long, conflicts_with = "file")]
    pub sha256: Option<String>,
    /// A local file (on storage every node mounts at the same path):
    /// registered as `file://<absolute path>` with its size and SHA-256.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// The container image this version runs in: a swap onto it starts
    /// each container replica from it (without it, the service's own).
    #[arg(long, conflicts_with = "from_task")]
    pub image: Option<String>,
}

/// `NAME` or `NAME:VERSION`.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    pub model: String,
}

/// `caldera model prewarm NAME:VERSION (--nodes a,b | --count N) [--pin]`
#[derive(clap::Args, Debug)]
pub struct PrewarmArgs {
    pub model: String,
    #[arg(long, value_delimiter = ',', conflicts_with = "count")]
    pub nodes: Vec<String>,
    #[arg(long)]
    pub count: Option<u32>,
    #[arg(long)]
    pub pin: bool,
}

/// `caldera model pin NAME:VERSION [--off]`
#[derive(clap::Args, Debug)]
pub struct PinArgs {
    pub model: String,
    #[arg(long)]
    pub off: bool,
}

/// Size and SHA-256 (lowercase hex) of `path`, read in 1 MiB chunks.
pub fn file_digest(path: &Path) -> Result<(u64, String), CliError> {
    caldera_actors::control_plane::file_digest(path)
        .map_err(|e| CliError::Usage(format!("--file {}: {e}", path.display())))
}

/// The registration body the flags describe.
fn registration(a: &RegisterArgs) -> Result<Value, CliError> {
    let (name, version) = match (&a.model, &a.name, &a.version) {
        (Some(m), _, _) => name_version(m)?,
        (None, Some(n), Some(v)) => (n.clone(), v.clone()),
        _ => {
            return Err(CliError::Usage(
                "name the version: NAME:VERSION, or --name and --version".into(),
            ))
        }
    };
    if let Some(task) = &a.from_task {
        let mut body = json!({"name": name, "version": version, "from_task": task});
        if let Some(p) = &a.path {
            body["path"] = json!(p);
        }
        if let Some(t) = &a.tenant {
            body["tenant"] = json!(t);
        }
        return Ok(body);
    }
    let (uri, size, sha) = match &a.file {
        Some(path) => {
            let abs = std::fs::canonicalize(path)
                .map_err(|e| CliError::Usage(format!("--file {}: {e}", path.display())))?;
            let (size, sha) = file_digest(&abs)?;
            (format!("file://{}", abs.display()), size, sha)
        }
        None => match (&a.uri, a.size_bytes, &a.sha256) {
            (Some(u), Some(s), Some(h)) => (u.clone(), s, h.clone()),
            _ => {
                return Err(CliError::Usage(
                    "give --uri, --size-bytes and --sha256, or --file PATH".into(),
                ))
            }
        },
    };
    let mut body = json!({"name": name, "version": version,
        "weights": {"uri": uri, "size_bytes": size, "sha256": sha}});
    if let Some(image) = &a.image {
        body["image"] = json!(image);
    }
    Ok(body)
}

/// `NAME:VERSION` split, for the commands that need both.
fn name_version(model: &str) -> Result<(String, String), CliError> {
    match model.rsplit_once(':') {
        Some((n, v)) if !n.is_empty() && !v.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(CliError::Usage(format!(
            "a model version is written NAME:VERSION, e.g. llama:v1, not {model:?}"
        ))),
    }
}

fn version_path(model: &str) -> Result<String, CliError> {
    let (n, v) = name_version(model)?;
    Ok(format!("/v1/models/{}/versions/{}", encode(&n), encode(&v)))
}

/// Runs a `model` subcommand.
pub fn model(args: ModelArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let json_out = args.opts.json;
    let data = match &args.action {
        ModelAction::Register(r) => {
            let body = registration(r)?;
            let answer = block_on(client.send_json(Verb::Post, "/v1/models", &body))?;
            if !json_out {
                let how = if answer.status == 201 {
                    "registered"
                } else {
                    "already registered (identical)"
                };
                let v: VersionView = read_view(&answer.data)?;
                println!(
                    "{}:{} {how}: {} bytes, sha256 {}",
                    v.name, v.version, v.weights.size_bytes, v.weights.sha256
                );
                return Ok(());
            }
            answer.data
        }
        ModelAction::List => {
            let data = block_on(client.get("/v1/models", &[]))?;
            if !json_out {
                print!("{}", render_list(&read_view::<Vec<ModelView>>(&data)?));
                return Ok(());
            }
            data
        }
        ModelAction::Show(s) => {
            if !s.model.contains(':') {
                let data = block_on(client.get(&format!("/v1/models/{}", encode(&s.model)), &[]))?;
                if !json_out {
                    print!("{}", render_list(&[read_view::<ModelView>(&data)?]));
                    return Ok(());
                }
                data
            } else {
                let data = block_on(client.get(&version_path(&s.model)?, &[]))?;
                if !json_out {
                    print!("{}", render_version(&read_view(&data)?));
                    return Ok(());
                }
                data
            }
        }
        ModelAction::Prewarm(p) => {
            let mut body = match (p.nodes.is_empty(), p.count) {
                (false, None) => json!({"nodes": p.nodes}),
                (true, Some(n)) => json!({"count": n}),
                _ => return Err(CliError::Usage("give --nodes a,b or --count N".into())),
            };
            if p.pin {
                body["pin"] = json!(true);
            }
            let path = format!("{}/prewarm", version_path(&p.model)?);
            let data = block_on(client.send_json(Verb::Post, &path, &body))?.data;
            if !json_out {
                let Prewarmed { nodes } = read_view(&data)?;
                if nodes.is_empty() {
                    println!(
                        "{}: no node to warm (every live node with a cache holds or reads it)",
                        p.model
                    );
                } else {
                    println!("warming {} on: {}", p.model, nodes.join(", "));
                }
                return Ok(());
            }
            data
        }
        ModelAction::Pin(p) => {
            let path = format!("{}/pin", version_path(&p.model)?);
            let body = json!({"pinned": !p.off});
            block_on(client.send_json(Verb::Put, &path, &body))?.data
        }
        ModelAction::Deprecate(s) => {
            let path = format!("{}/deprecate", version_path(&s.model)?);
            block_on(client.send_json(Verb::Post, &path, &json!({})))?.data
        }
        ModelAction::Retire(r) => {
            let path = format!("{}/retire", version_path(&r.model)?);
            let body = match &r.replace_with {
                Some(v) => json!({"replace_with": v}),
                None => json!({}),
            };
            block_on(client.send_json(Verb::Post, &path, &body))?.data
        }
    };
    if json_out {
        return print_json(&data);
    }
    print!("{}", render_version(&read_view(&data)?));
    Ok(())
}

/// One row per version.
fn render_list(models: &[ModelView]) -> String {
    let mut t = Table::new(&["MODEL", "STATE", "SIZE", "PINNED", "VERIFIED ON", "TASKS"]);
    for v in models.iter().flat_map(|m| &m.versions) {
        let verified: Vec<&str> = v
            .nodes
            .iter()
            .filter(|c| c.copy == "verified")
            .map(|c| c.node.as_str())
            .collect();
        t.row(vec![
            format!("{}:{}", v.name, v.version),
            v.state.clone(),
            v.weights.size_bytes.to_string(),
            v.pinned.to_string(),
            verified.join(","),
            v.tasks.len().to_string(),
        ]);
    }
    t.render()
}

/// A version with each node's copy.
fn render_version(v: &VersionView) -> String {
    let mut out = key_values(&[
        ("model", format!("{}:{}", v.name, v.version)),
        ("state", v.state.clone()),
        ("uri", v.weights.uri.clone()),
        ("size_bytes", v.weights.size_bytes.to_string()),
        ("sha256", v.weights.sha256.clone()),
        ("pinned", v.pinned.to_string()),
        ("origin reads now", v.origin_pulls_now.to_string()),
    ]);
    let mut t = Table::new(&["NODE", "COPY", "BYTES", "SOURCE"]);
    for c in &v.nodes {
        t.row(vec![
            c.node.clone(),
            c.copy.clone(),
            c.bytes_done.to_string(),
            c.source.clone(),
        ]);
    }
    out.push_str(&t.render());
    if !v.tasks.is_empty() {
        out.push_str(&format!("tasks: {}\n", v.tasks.join(", ")));
    }
    if let Some(order) = &v.retire {
        let with = order.replace_with.as_deref().unwrap_or("nothing");
        out.push_str(&format!(
            "retire: asked by {}, replaced with {with}\n",
            order.by
        ));
    }
    for (tenant, tasks) in v.used_by.iter().flatten() {
        out.push_str(&format!("still used by {tenant}: {}\n", tasks.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_registered_with_its_size_and_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.bin");
        std::fs::write(&p, b"test").unwrap();
        let (size, sha) = file_digest(&p).unwrap();
        assert_eq!(size, 4);
        assert_eq!(
            sha,
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        let mut args = RegisterArgs {
            model: None,
            name: Some("m".into()),
            version: Some("v1".into()),
            from_task: None,
            path: None,
            tenant: None,
            uri: None,
            size_bytes: None,
            sha256: None,
            file: Some(p),
            image: None,
        };
        let body = registration(&args).unwrap();
        let uri = body["weights"]["uri"].as_str().unwrap_or_default();
        assert!(uri.starts_with("file:///"), "{body}");
        assert!(body.get("image").is_none(), "{body}");
        args.image = Some("registry.internal/app:2".into());
        let body = registration(&args).unwrap();
        assert_eq!(body["image"], "registry.internal/app:2");
        args.image = None;
        // NAME:VERSION and --from-task: the control plane hashes the file.
        args.model = Some("m:v2".into());
        args.from_task = Some("train".into());
        let body = registration(&args).unwrap();
        assert_eq!(
            body,
            json!({"name": "m", "version": "v2", "from_task": "train"})
        );
        assert!(name_version("llama").is_err());
        assert_eq!(
            name_version("llama:v1").unwrap(),
            ("llama".to_string(), "v1".to_string())
        );
    }

    #[test]
    fn a_version_shows_its_copies_its_retire_order_and_who_still_uses_it() {
        let v: VersionView = serde_json::from_value(json!({"name": "llama", "version": "v1",
            "state": "retiring", "pinned": false, "registered_at_ms": 0, "origin_pulls_now": 1,
            "weights": {"uri": "file:///w", "size_bytes": 4, "sha256": "ab"},
            "nodes": [{"node": "n1", "copy": "verified", "bytes_done": 4, "source": "origin"}],
            "tasks": ["chat"], "retire": {"by": "operator", "at_ms": 0, "replace_with": "llama:v2"},
            "used_by": {"alpha": ["chat"]}}))
        .expect("a version view");
        let out = render_version(&v);
        assert!(out.contains("n1    verified  4      origin"), "{out}");
        assert!(
            out.contains("retire: asked by operator, replaced with llama:v2\n"),
            "{out}"
        );
        assert!(out.ends_with("still used by alpha: chat\n"), "{out}");
        let list = render_list(&[ModelView {
            name: "llama".into(),
            versions: vec![v],
        }]);
        assert!(
            list.contains("llama:v1  retiring  4     false   n1           1"),
            "{list}"
        );
    }
}
