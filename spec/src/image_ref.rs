//! An image reference as podman reads one: `[REGISTRY/]PATH[:TAG][@sha256:HEX]`.
//! The control plane checks the spelling at submission (so a typo fails with
//! the field named, not minutes later as a pull error on a node) and reads the
//! registry out of it to hand the tenant's credentials for that registry only.

/// Longest reference accepted: the distribution spec's limit for a name is
/// 255 characters; a tag and a digest add at most 200 more.
pub const MAX_IMAGE_REF_LEN: usize = 455;

/// The registry podman pulls an image from when its name names none.
pub const DEFAULT_REGISTRY: &str = "docker.io";

/// A checked image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// The registry host (with `:port`), if the reference names one.
    pub registry: Option<&'a str>,
    /// The repository path inside the registry (`deeplearning/pytorch`).
    pub path: &'a str,
    pub tag: Option<&'a str>,
    pub digest: Option<&'a str>,
}

impl ImageRef<'_> {
    /// The registry the image is pulled from: the one named, else podman's
    /// default (`docker.io`).
    pub fn registry_or_default(&self) -> &str {
        self.registry.unwrap_or(DEFAULT_REGISTRY)
    }
}

/// Which part of an image reference is wrong. The words name the part and
/// what it may hold, since they reach the person who typed the reference
/// (as the message of the `image` or `registry` field's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    #[error("the image is empty; name one, e.g. registry.internal/team/app:1.0")]
    Empty,
    #[error(
        "the image reference is {len} characters; the limit is {}",
        MAX_IMAGE_REF_LEN
    )]
    TooLong { len: usize },
    #[error("the image's registry {host:?} is not a host name (letters, digits, '-' and '.')")]
    RegistryNotAHost { host: String },
    #[error("the image's registry {host:?} has a port that is not a number 1-65535")]
    RegistryPort { host: String },
    #[error("the image names no repository")]
    NoRepository,
    #[error(
        "the image's repository part {part:?} may hold lowercase letters, digits and \
         '.', '_', '-' between them only (e.g. deeplearning/pytorch)"
    )]
    RepositoryPart { part: String },
    #[error(
        "the image's tag {tag:?} may hold letters, digits, '_', '.' and '-' (not first), \
         at most 128"
    )]
    Tag { tag: String },
    #[error("the image's digest {digest:?} must be sha256: and 64 lowercase hex digits")]
    Digest { digest: String },
}

/// Callers that report a field's problem as text (a spec error's message)
/// take the words as they are.
impl From<ImageRefError> for String {
    fn from(e: ImageRefError) -> String {
        e.to_string()
    }
}

/// Reads `image`, or says what is wrong with it in words a person uses.
pub fn parse(image: &str) -> Result<ImageRef<'_>, ImageRefError> {
    if image.trim().is_empty() {
        return Err(ImageRefError::Empty);
    }
    if image.len() > MAX_IMAGE_REF_LEN {
        return Err(ImageRefError::TooLong { len: image.len() });
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(check_digest(d)?)),
        None => (image, None),
    };
    // A tag follows the last ':' that comes after the last '/' (a ':' before
    // it is a registry's port).
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name[last_slash..].rfind(':') {
        Some(i) => {
            let at = last_slash + i;
            (&name[..at], Some(check_tag(&name[at + 1..])?))
        }
        None => (name, None),
    };
    let (registry, path) = match name.split_once('/') {
        Some((first, rest)) if names_a_registry(first) => (Some(check_registry(first)?), rest),
        _ => (None, name),
    };
    check_path(path)?;
    Ok(ImageRef {
        registry,
        path,
        tag,
        digest,
    })
}

/// The first component is a registry when it could not be a repository
/// name: it holds a `.` or a `:`, or is `localhost` (docker's rule).
fn names_a_registry(first: &str) -> bool {
    first.contains(['.', ':']) || first == "localhost"
}

/// A registry host name with an optional `:port`.
pub fn check_registry(host: &str) -> Result<&str, ImageRefError> {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    let name_ok = !name.is_empty()
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    if !name_ok {
        return Err(ImageRefError::RegistryNotAHost { host: host.into() });
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(ImageRefError::RegistryPort { host: host.into() });
        }
    }
    Ok(host)
}

fn check_path(path: &str) -> Result<(), ImageRefError> {
    if path.is_empty() {
        return Err(ImageRefError::NoRepository);
    }
    for part in path.split('/') {
        let ok = !part.is_empty()
            && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && part.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            });
        if !ok {
            return Err(ImageRefError::RepositoryPart { part: part.into() });
        }
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<&str, ImageRefError> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(tag)
    } else {
        Err(ImageRefError::Tag { tag: tag.into() })
    }
}

fn check_digest(digest: &str) -> Result<&str, ImageRefError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
        Ok(digest)
    } else {
        Err(ImageRefError::Digest {
            digest: digest.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_image_and_its_usual_spellings_read() {
        let r = parse("registry.internal/deeplearning/pytorch:2.1-cu12.1").unwrap();
        assert_eq!(r.registry, Some("registry.internal"));
        assert_eq!(r.path, "deeplearning/pytorch");
        assert_eq!(r.tag, Some("2.1-cu12.1"));
        let r = parse("127.0.0.1:5555/team/app").unwrap();
        assert_eq!(r.registry, Some("127.0.0.1:5555"));
        assert_eq!(r.tag, None);
        let r = parse("alpine:3.19").unwrap();
        assert_eq!((r.registry, r.path), (None, "alpine"));
        assert_eq!(r.registry_or_default(), "docker.io");
        let d = format!("localhost/app@sha256:{}", "ab".repeat(32));
        let r = parse(&d).unwrap();
        assert_eq!(r.registry, Some("localhost"));
        assert!(r.digest.is_some());
    }

    #[test]
    fn a_bad_reference_says_which_part_is_wrong() {
        let why = |s: &str| parse(s).unwrap_err().to_string();
        assert!(why("").contains("empty"));
        assert!(why("Registry.internal/App:1").contains("repository part \"App\""));
        assert!(why("app:").contains("tag \"\""));
        assert!(why("app:-x").contains("tag"));
        assert!(why("app@sha256:xyz").contains("digest"));
        assert!(why("reg.internal:99999/app").contains("port"));
        assert!(why("reg..internal/app").contains("registry"));
        assert!(why("app//x").contains("repository part \"\""));
        assert!(why("a b").contains("repository part"));
        assert!(why(&"a".repeat(500)).contains("limit is 455"));
    }

    #[test]
    fn each_wrong_part_is_its_own_kind_and_carries_what_was_given() {
        use ImageRefError as E;
        let kind = |s: &str| parse(s).unwrap_err();
        assert_eq!(kind(" "), E::Empty);
        assert_eq!(kind(&"a".repeat(500)), E::TooLong { len: 500 });
        assert_eq!(
            kind("reg..internal/app"),
            E::RegistryNotAHost {
                host: "reg..internal".into()
            }
        );
        assert_eq!(
            kind("reg.internal:0/app"),
            E::RegistryPort {
                host: "reg.internal:0".into()
            }
        );
        assert_eq!(kind("reg.internal/"), E::NoRepository);
        assert_eq!(
            kind("reg.internal/a//b"),
            E::RepositoryPart { part: "".into() }
        );
        assert_eq!(kind("Ab"), E::RepositoryPart { part: "Ab".into() });
        assert_eq!(kind("app:-x"), E::Tag { tag: "-x".into() });
        assert_eq!(
            kind("app@md5:1"),
            E::Digest {
                digest: "md5:1".into()
            }
        );
        assert_eq!(check_path(""), Err(E::NoRepository));
    }

    #[test]
    fn the_words_a_person_reads_are_whole_sentences() {
        // The field error's message is these words, verbatim.
        assert_eq!(
            parse("app:-x").unwrap_err().to_string(),
            "the image's tag \"-x\" may hold letters, digits, '_', '.' and '-' (not first), at most 128"
        );
        assert_eq!(
            parse("Ab").unwrap_err().to_string(),
            "the image's repository part \"Ab\" may hold lowercase letters, digits and '.', '_', '-' \
             between them only (e.g. deeplearning/pytorch)"
        );
        assert_eq!(
            String::from(parse(&"a".repeat(456)).unwrap_err()),
            "the image reference is 456 characters; the limit is 455"
        );
    }
}
