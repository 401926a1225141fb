//! One configuration key as the reference page, the loader and the
//! deprecation notes see it, and the macro that declares a section's keys
//! once: field, type, default, doc text and former flat name side by side,
//! so none of them can drift from the others.

/// Prefix of every environment variable that sets a key.
pub const ENV_PREFIX: &str = "CALDERA_";

/// Separates the section from the key in an environment variable name
/// (`CALDERA_SCHEDULING__MAX_IMAGE_PULLS`): keys have single underscores of
/// their own, so a single one could not say where the section ends.
pub const ENV_SECTION_SEPARATOR: &str = "__";

/// A key of the server configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The section it lives in (`scheduling`).
    pub section: &'static str,
    /// Its field in the section's struct (`max_image_pulls`).
    pub field: &'static str,
    /// Its doc comment, one source line per line.
    pub doc: &'static str,
    /// The flat key it had before keys lived in sections, still accepted
    /// with a deprecation warning.
    pub was: Option<&'static str>,
}

impl Key {
    /// Its name in the file, kebab-case (`max-image-pulls`).
    pub fn name(&self) -> String {
        self.field.replace('_', "-")
    }

    /// Section and name, the way errors and the reference name it
    /// (`scheduling.max-image-pulls`; also a valid TOML dotted key).
    pub fn path(&self) -> String {
        format!("{}.{}", self.section, self.name())
    }

    /// How a file sets it: `[scheduling] max-image-pulls`.
    pub fn in_file(&self) -> String {
        format!("[{}] {}", self.section, self.name())
    }

    /// The environment variable that sets it (`CALDERA_SCHEDULING__MAX_IMAGE_PULLS`).
    pub fn env_var(&self) -> String {
        format!(
            "{ENV_PREFIX}{}{ENV_SECTION_SEPARATOR}{}",
            self.section.to_ascii_uppercase(),
            self.field.to_ascii_uppercase()
        )
    }

    /// The variable of its former flat key (`CALDERA_MAX_IMAGE_PULLS`).
    pub fn legacy_env_var(&self) -> Option<String> {
        self.was
            .map(|was| format!("{ENV_PREFIX}{}", was.to_ascii_uppercase().replace('-', "_")))
    }

    /// The doc comment as one paragraph (source line breaks joined).
    pub fn description(&self) -> String {
        self.doc
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Declares a section: its struct (kebab-case keys, every field defaulted,
/// unknown keys refused), its `Default` and its [`Key`] table.
///
/// ```text
/// section! {
///     /// What the section is for.
///     pub struct SchedulingSection = "scheduling" {
///         /// What the key does.
///         max_image_pulls: u32 = 2, was "max-image-pulls";
///     }
/// }
/// ```
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident = $section:literal {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $default:expr $(, was $was:literal)?;
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("Default: `", stringify!($default), "`.")]
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }

        impl $name {
            /// The section's name in the file.
            pub const SECTION: &'static str = $section;
            /// What the section is for: its doc comment.
            pub const ABOUT: &'static str = concat!($($sdoc, "\n",)*);
            /// Every key of the section, in declaration order.
            pub const KEYS: &'static [$crate::config::key::Key] = &[
                $(
                    $crate::config::key::Key {
                        section: $section,
                        field: stringify!($field),
                        doc: concat!($($doc, "\n",)*),
                        was: section!(@was $($was)?),
                    },
                )*
            ];
        }
    };
    (@was $was:literal) => { Some($was) };
    (@was) => { None };
}

pub(crate) use section;

#[cfg(test)]
mod tests {
    use super::*;

    const K: Key = Key {
        section: "scheduling",
        field: "max_image_pulls",
        doc: " How many nodes may pull\n one image at once.\n",
        was: Some("max-image-pulls"),
    };

    #[test]
    fn a_key_is_named_the_ways_a_person_writes_it() {
        assert_eq!(K.name(), "max-image-pulls");
        assert_eq!(K.path(), "scheduling.max-image-pulls");
        assert_eq!(K.in_file(), "[scheduling] max-image-pulls");
        assert_eq!(K.env_var(), "CALDERA_SCHEDULING__MAX_IMAGE_PULLS");
        assert_eq!(
            K.legacy_env_var().as_deref(),
            Some("CALDERA_MAX_IMAGE_PULLS")
        );
        assert_eq!(
            K.description(),
            "How many nodes may pull one image at once."
        );
    }
}
