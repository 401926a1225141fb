//! The reference pages under `docs/reference/`, generated from the code that
//! defines what they describe: the CLI from its clap definition, the error
//! codes from their registry, the metric families from the registries
//! `/metrics` encodes, the HTTP API from the OpenAPI document the gateway
//! serves, the configuration keys from the config types. A page written by
//! hand drifts from the product; these cannot, because
//! `caldera reference --check` (run by the test suite) fails on any page
//! that differs from what the code generates now.
mod cli;
mod config;
mod errors;
mod http_api;
mod index;
mod markdown;
mod metrics;

use std::path::{Path, PathBuf};

/// What regenerates the pages; named in every stale-page message.
pub const REGENERATE: &str = "scripts/reference";

/// `caldera reference`: write the pages, or check the ones on disk.
#[derive(clap::Args, Debug)]
pub struct ReferenceArgs {
    /// The directory of the pages.
    #[arg(default_value = "docs/reference", value_name = "DIR")]
    pub dir: PathBuf,
    /// Compare the pages in DIR with what the code generates, byte for byte,
    /// instead of writing them; fails naming each page that differs.
    #[arg(long)]
    pub check: bool,
}

/// One generated page: its file name under the reference directory, and its text.
pub struct Page {
    pub file: &'static str,
    pub text: String,
}

/// Why the pages could not be written or are not current.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the metric families cannot be listed: {0}")]
    Metrics(#[from] metrics::MetricsPageError),
    #[error(
        "the reference pages in {dir} are not what the code generates: {}; regenerate them with `{REGENERATE}`",
        .stale.join(", ")
    )]
    Stale { dir: String, stale: Vec<String> },
}

/// Every page, generated from `cli` (the binary's clap definition) and the
/// other crates' registries.
pub fn pages(cli: clap::Command) -> Result<Vec<Page>, ReferenceError> {
    let mut pages = vec![
        Page {
            file: "cli.md",
            text: cli::page(cli),
        },
        Page {
            file: "config.md",
            text: config::page(),
        },
        Page {
            file: "errors.md",
            text: errors::page(),
        },
        Page {
            file: "http-api.md",
            text: http_api::page(),
        },
        Page {
            file: "metrics.md",
            text: metrics::page().map_err(ReferenceError::Metrics)?,
        },
    ];
    let files: Vec<&str> = pages.iter().map(|p| p.file).collect();
    pages.push(Page {
        file: "README.md",
        text: index::page(&files),
    });
    Ok(pages)
}

/// Writes every page into `dir`, or with `check` compares them.
pub fn run(args: ReferenceArgs, cli: clap::Command) -> Result<(), ReferenceError> {
    let pages = pages(cli)?;
    if args.check {
        return check(&args.dir, &pages);
    }
    std::fs::create_dir_all(&args.dir).map_err(|source| ReferenceError::Write {
        path: args.dir.clone(),
        source,
    })?;
    for p in &pages {
        let path = args.dir.join(p.file);
        std::fs::write(&path, &p.text).map_err(|source| ReferenceError::Write { path, source })?;
    }
    println!("wrote {} pages into {}", pages.len(), args.dir.display());
    Ok(())
}

/// Every page that is missing, differs, or sits in `dir` without being generated.
fn check(dir: &Path, pages: &[Page]) -> Result<(), ReferenceError> {
    let mut stale = Vec::new();
    for p in pages {
        let path = dir.join(p.file);
        match std::fs::read(&path) {
            Ok(on_disk) if on_disk == p.text.as_bytes() => {}
            Ok(_) => stale.push(format!("{} differs", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                stale.push(format!("{} is missing", path.display()))
            }
            Err(source) => return Err(ReferenceError::Read { path, source }),
        }
    }
    let entries = std::fs::read_dir(dir).map_err(|source| ReferenceError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut extra: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && !pages.iter().any(|p| p.file == name))
        .map(|name| format!("{} is not a generated page", dir.join(name).display()))
        .collect();
    extra.sort();
    stale.extend(extra);
    if stale.is_empty() {
        println!(
            "{} reference pages in {} are current",
            pages.len(),
            dir.display()
        );
        Ok(())
    } else {
        Err(ReferenceError::Stale {
            dir: dir.display().to_string(),
            stale,
        })
    }
}
