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

/// Reads `image`, or says what is wrong with it in words a person uses.
pub fn parse(image: &str) -> Result<ImageRef<'_>, String> {
    if image.trim().is_empty() {
        return Err("the image is empty; name one, e.g. registry.internal/team/app:1.0".into());
    }
    if image.len() > MAX_IMAGE_REF_LEN {
        return Err(format!(
            "the image reference is {} characters; the limit is {MAX_IMAGE_REF_LEN}",
            image.len()
        ));
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
pub fn check_registry(host: &str) -> Result<&str, String> {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    let name_ok = !name.is_empty()
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    if !name_ok {
        return Err(format!(
            "the image's registry {host:?} is not a host name (letters, digits, '-' and '.')"
        ));
    }
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!(
                "the image's registry {host:?} has a port that is not a number 1-65535"
            ));
        }
    }
    Ok(host)
}

fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the image names no repository".into());
    }
    for part in path.split('/') {
        let ok = !part.is_empty()
            && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && part.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
            });
        if !ok {
            return Err(format!(
                "the image's repository part {part:?} may hold lowercase letters, digits and \
                 '.', '_', '-' between them only (e.g. deeplearning/pytorch)"
            ));
        }
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<&str, String> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(tag)
    } else {
        Err(format!(
            "the image's tag {tag:?} may hold letters, digits, '_', '.' and '-' (not first), \
             at most 128"
        ))
    }
}

fn check_digest(digest: &str) -> Result<&str, String> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
        Ok(digest)
    } else {
        Err(format!(
            "the image's digest {digest:?} must be sha256: and 64 lowercase hex digits"
        ))
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
        let why = |s: &str| parse(s).unwrap_err();
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
}
