//! Where each name a configuration may be given by goes: a section's key, a
//! former flat key (before keys lived in sections; accepted, with a
//! deprecation warning that names the new key), or nothing the server
//! knows (refused, naming it). Pure: the loader reads the file and the
//! environment and asks here what each name means.
use super::key::{Key, ENV_PREFIX, ENV_SECTION_SEPARATOR};
use super::{is_section, key, keys, SECTIONS};
use std::fmt;

/// The key a former flat name (`max-image-pulls`) now is.
pub fn by_former_name(old: &str) -> Option<&'static Key> {
    keys().find(|k| k.was == Some(old))
}

/// A deprecated name the configuration was given by, and the key it set.
#[derive(Debug, Clone, PartialEq)]
pub struct Deprecation {
    /// The name as given: a flat file key or a flat variable.
    pub old: String,
    /// The key it set.
    pub key: &'static Key,
    /// Whether it came from the environment (else from the file).
    pub from_env: bool,
}

impl fmt::Display for Deprecation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.from_env {
            write!(
                f,
                "environment variable {} is deprecated: use {}",
                self.old,
                self.key.env_var()
            )
        } else {
            write!(
                f,
                "config key \"{}\" is deprecated: use {}",
                self.old,
                self.key.in_file()
            )
        }
    }
}

/// A name the configuration cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NameError {
    /// A former flat name and the key that replaces it were both given.
    #[error("{old} and {new} are both set: {new} replaces {old}, so set only {new}")]
    BothSet { old: String, new: String },
    /// A name at the top of a file that is neither a section nor a former key.
    #[error("unknown key `{name}` (a file holds the sections {sections})")]
    UnknownTop { name: String, sections: String },
    /// A name inside a known section that the section does not have.
    #[error("unknown key `{section}.{name}` (the keys of [{section}]: {known})")]
    UnknownInSection {
        section: String,
        name: String,
        known: String,
    },
    /// A section given as a value instead of a table of keys.
    #[error("`{section}` is a section: write its keys under [{section}]")]
    NotATable { section: String },
}

/// One top-level entry of a file: its name and, for a table, its keys.
pub type FileEntry = (String, Option<Vec<String>>);

/// What to do with a file's top-level entry.
#[derive(Debug, Clone, PartialEq)]
pub enum FilePlacement {
    /// A section: kept as it is.
    Section(String),
    /// A former flat key: its value moves to `Deprecation::key`.
    Moved(Deprecation),
}

/// Plans a file's top level: every entry is a section whose keys all exist,
/// or a former flat key whose new key the file does not also set.
pub fn plan_file(entries: &[FileEntry]) -> Result<Vec<FilePlacement>, NameError> {
    let mut plan = Vec::new();
    for (name, table) in entries {
        if is_section(name) {
            let Some(names) = table else {
                return Err(NameError::NotATable {
                    section: name.clone(),
                });
            };
            for sub in names {
                if key(name, sub).is_none() {
                    return Err(unknown_in_section(name, sub));
                }
            }
            plan.push(FilePlacement::Section(name.clone()));
        } else if let Some(key) = by_former_name(name) {
            let also_new = entries.iter().any(|(section, table)| {
                section == key.section
                    && table
                        .as_ref()
                        .is_some_and(|names| names.contains(&key.name()))
            });
            if also_new {
                return Err(NameError::BothSet {
                    old: format!("config key \"{name}\""),
                    new: key.in_file(),
                });
            }
            plan.push(FilePlacement::Moved(Deprecation {
                old: name.clone(),
                key,
                from_env: false,
            }));
        } else {
            return Err(NameError::UnknownTop {
                name: name.clone(),
                sections: SECTIONS
                    .iter()
                    .map(|s| format!("[{}]", s.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(plan)
}

fn unknown_in_section(section: &str, name: &str) -> NameError {
    let known = keys()
        .filter(|k| k.section == section)
        .map(Key::name)
        .collect::<Vec<_>>()
        .join(", ");
    NameError::UnknownInSection {
        section: section.to_string(),
        name: name.to_string(),
        known,
    }
}

/// What an environment variable is to the configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvName {
    /// `CALDERA_<SECTION>__<KEY>`.
    Key(&'static Key),
    /// A former flat variable (`CALDERA_NODE_TIMEOUT_MS`).
    Former(&'static Key),
    /// Not configuration: client settings (`CALDERA_SERVER`,
    /// `CALDERA_TOKEN`) and anything else share the prefix.
    Other,
}

/// Reads a variable's name. A known section with an unknown key is an
/// error (a typo would otherwise be ignored); anything else that is not a
/// key is [`EnvName::Other`].
pub fn env_name(var: &str) -> Result<EnvName, NameError> {
    let Some(rest) = var.strip_prefix(ENV_PREFIX) else {
        return Ok(EnvName::Other);
    };
    if let Some((section, name)) = rest.split_once(ENV_SECTION_SEPARATOR) {
        let section = section.to_ascii_lowercase();
        if !is_section(&section) {
            return Ok(EnvName::Other);
        }
        let name = name.to_ascii_lowercase().replace('_', "-");
        return match key(&section, &name) {
            Some(k) => Ok(EnvName::Key(k)),
            None => Err(unknown_in_section(&section, &name)),
        };
    }
    Ok(keys()
        .find(|k| k.legacy_env_var().as_deref() == Some(var))
        .map_or(EnvName::Other, EnvName::Former))
}

/// A configuration variable: the key it sets, its value, and for a former
/// name its deprecation.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvSetting {
    pub key: &'static Key,
    pub value: String,
    pub deprecation: Option<Deprecation>,
}

/// The configuration variables among `vars`. A former variable and its new
/// one both set is refused, naming both.
pub fn plan_env(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<EnvSetting>, NameError> {
    let mut plan: Vec<EnvSetting> = Vec::new();
    for (var, value) in vars {
        let (key, deprecation) = match env_name(&var)? {
            EnvName::Other => continue,
            EnvName::Key(key) => (key, None),
            EnvName::Former(key) => (
                key,
                Some(Deprecation {
                    old: var.clone(),
                    key,
                    from_env: true,
                }),
            ),
        };
        if let Some(earlier) = plan.iter().find(|s| s.key == key) {
            let old = match (&deprecation, &earlier.deprecation) {
                (Some(d), _) | (None, Some(d)) => d.old.clone(),
                (None, None) => var,
            };
            return Err(NameError::BothSet {
                old,
                new: key.env_var(),
            });
        }
        plan.push(EnvSetting {
            key,
            value,
            deprecation,
        });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, keys: Option<&[&str]>) -> FileEntry {
        (
            name.to_string(),
            keys.map(|ks| ks.iter().map(|k| k.to_string()).collect()),
        )
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_former_flat_key_moves_to_its_section_with_a_warning_naming_the_new_key() {
        let plan = plan_file(&[
            entry("max-image-pulls", None),
            entry("nodes", Some(&["heartbeat-interval-ms"])),
        ])
        .unwrap();
        let FilePlacement::Moved(d) = &plan[0] else {
            panic!("{plan:?}")
        };
        assert_eq!(d.key.path(), "scheduling.max-image-pulls");
        assert_eq!(
            d.to_string(),
            "config key \"max-image-pulls\" is deprecated: use [scheduling] max-image-pulls"
        );
        assert_eq!(plan[1], FilePlacement::Section("nodes".into()));
    }

    #[test]
    fn a_renamed_former_key_names_its_new_name() {
        let plan = plan_file(&[entry("webhook-retry-max-ms", None)]).unwrap();
        let FilePlacement::Moved(d) = &plan[0] else {
            panic!("{plan:?}")
        };
        assert_eq!(
            d.to_string(),
            "config key \"webhook-retry-max-ms\" is deprecated: use [webhooks] retry-max-ms"
        );
    }

    #[test]
    fn a_file_setting_the_old_and_the_new_key_is_refused_naming_both() {
        let err = plan_file(&[
            entry("scheduling", Some(&["max-image-pulls"])),
            entry("max-image-pulls", None),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "config key \"max-image-pulls\" and [scheduling] max-image-pulls are both set: \
             [scheduling] max-image-pulls replaces config key \"max-image-pulls\", \
             so set only [scheduling] max-image-pulls"
        );
    }

    #[test]
    fn unknown_names_are_refused_naming_them() {
        let err = plan_file(&[entry("node-timout-ms", None)]).unwrap_err();
        assert!(
            err.to_string().contains("unknown key `node-timout-ms`"),
            "{err}"
        );
        let err = plan_file(&[entry("scheduling", Some(&["max-image-puls"]))]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("unknown key `scheduling.max-image-puls`"),
            "{text}"
        );
        assert!(text.contains("max-image-pulls"), "{text}");
        let err = plan_file(&[entry("nodes", None)]).unwrap_err();
        assert_eq!(
            err,
            NameError::NotATable {
                section: "nodes".into()
            }
        );
    }

    #[test]
    fn environment_names_follow_the_sections_and_keep_the_former_ones() {
        let by = |v: &str| env_name(v).unwrap();
        assert_eq!(
            by("CALDERA_SCHEDULING__MAX_IMAGE_PULLS"),
            EnvName::Key(key("scheduling", "max-image-pulls").unwrap())
        );
        assert_eq!(
            by("CALDERA_NODE_TIMEOUT_MS"),
            EnvName::Former(key("nodes", "timeout-ms").unwrap())
        );
        // Client settings share the prefix and are not configuration.
        for other in [
            "CALDERA_SERVER",
            "CALDERA_TOKEN",
            "CALDERA_LOG",
            "PATH",
            "CALDERA_",
        ] {
            assert_eq!(by(other), EnvName::Other, "{other}");
        }
        let err = env_name("CALDERA_SCHEDULING__MAX_IMAGE_PULS").unwrap_err();
        assert!(
            err.to_string().contains("scheduling.max-image-puls"),
            "{err}"
        );
    }

    #[test]
    fn an_old_and_a_new_variable_for_one_key_are_refused_naming_both() {
        let plan = plan_env(vars(&[
            ("CALDERA_MAX_IMAGE_PULLS", "3"),
            ("CALDERA_NODES__TIMEOUT_MS", "9000"),
            ("CALDERA_TOKEN", "t"),
        ]))
        .unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(
            plan[0].deprecation.as_ref().unwrap().to_string(),
            "environment variable CALDERA_MAX_IMAGE_PULLS is deprecated: \
             use CALDERA_SCHEDULING__MAX_IMAGE_PULLS"
        );
        assert!(plan[1].deprecation.is_none());
        for order in [
            [
                ("CALDERA_NODES__TIMEOUT_MS", "1"),
                ("CALDERA_NODE_TIMEOUT_MS", "2"),
            ],
            [
                ("CALDERA_NODE_TIMEOUT_MS", "2"),
                ("CALDERA_NODES__TIMEOUT_MS", "1"),
            ],
        ] {
            let err = plan_env(vars(&order)).unwrap_err();
            assert_eq!(
                err,
                NameError::BothSet {
                    old: "CALDERA_NODE_TIMEOUT_MS".into(),
                    new: "CALDERA_NODES__TIMEOUT_MS".into(),
                }
            );
        }
    }
}
