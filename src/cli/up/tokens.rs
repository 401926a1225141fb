//! The tokens of the embedded default, kept in `<data-dir>/up-tokens.json`.
//!
//! `caldera server` prints generated tokens once and keeps only their hashes.
//! `caldera up` is the development default instead: it must print the
//! operator, join and demo tenant tokens on every run, so it generates them
//! itself on the first run and keeps them in plain text in a file only its
//! owner can read (mode 0600), next to the data they protect.
use crate::cli::CliError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Name of the token file inside the data directory.
pub const FILE_NAME: &str = "up-tokens.json";
/// Random bytes in a generated token (hex-encoded: 64 characters).
const TOKEN_BYTES: usize = 32;

/// The tokens `caldera up` hands to the server and prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpTokens {
    pub operator_token: String,
    pub join_token: String,
    /// Set once the demo tenant has been created; its token is only returned
    /// by the server at creation, so it cannot be recovered later.
    #[serde(default)]
    pub demo_tenant_token: Option<String>,
}

/// Path of the token file in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// The saved tokens, or new ones on the first run. Tokens given in the
/// configuration (e.g. `CALDERA_OPERATOR_TOKEN`) take the place of saved or
/// generated ones. The result is saved before it is returned so the server
/// never accepts a token that the next run would not know.
pub fn load_or_create(
    data_dir: &Path,
    operator: Option<String>,
    join: Option<String>,
) -> Result<UpTokens, CliError> {
    let file = path(data_dir);
    let saved = match std::fs::read(&file) {
        Ok(bytes) => Some(serde_json::from_slice::<UpTokens>(&bytes).map_err(|e| {
            CliError::Failed(format!(
                "{} is damaged ({e}); fix it or remove the data directory",
                file.display()
            ))
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(CliError::Failed(format!("reading {}: {e}", file.display()))),
    };
    let tokens = match saved {
        Some(saved) => UpTokens {
            operator_token: operator.unwrap_or(saved.operator_token),
            join_token: join.unwrap_or(saved.join_token),
            demo_tenant_token: saved.demo_tenant_token,
        },
        None => UpTokens {
            operator_token: operator.map_or_else(generate, Ok)?,
            join_token: join.map_or_else(generate, Ok)?,
            demo_tenant_token: None,
        },
    };
    save(data_dir, &tokens)?;
    Ok(tokens)
}

/// Writes the tokens atomically (temp file, fsync, rename) with mode 0600.
pub fn save(data_dir: &Path, tokens: &UpTokens) -> Result<(), CliError> {
    let file = path(data_dir);
    let body = serde_json::to_vec_pretty(tokens)
        .map_err(|e| CliError::Failed(format!("encoding tokens: {e}")))?;
    caldera_node::secret::write_private(&file, &body)
        .map_err(|e| CliError::Failed(format!("writing {}: {e}", file.display())))
}

/// A new token: 32 random bytes from the operating system, hex-encoded.
pub fn generate() -> Result<String, CliError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| CliError::Failed(format!("no randomness for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("caldera-up-tokens-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        dir
    }

    #[test]
    fn generated_tokens_are_64_hex_characters_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_first_run_creates_a_private_file_that_later_runs_reuse() {
        let dir = temp_dir("reuse");
        let first = load_or_create(&dir, None, None).unwrap();
        let mode = std::fs::metadata(path(&dir)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let with_demo = UpTokens {
            demo_tenant_token: Some("demo-token".into()),
            ..first.clone()
        };
        save(&dir, &with_demo).unwrap();
        let again = load_or_create(&dir, None, None).unwrap();
        assert_eq!(again, with_demo);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn configured_tokens_win_over_saved_ones() {
        let dir = temp_dir("configured");
        let first = load_or_create(&dir, None, None).unwrap();
        let next = load_or_create(&dir, Some("operator-from-env-0000".into()), None).unwrap();
        assert_eq!(next.operator_token, "operator-from-env-0000");
        assert_eq!(next.join_token, first.join_token);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_silent_regeneration() {
        let dir = temp_dir("damaged");
        std::fs::write(path(&dir), "{not json").unwrap();
        let err = load_or_create(&dir, None, None).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
