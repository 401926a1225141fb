//! `config.md`: every section and key of `caldera server`'s configuration
//! with its default, environment variable, former flat name and description.
//! The config types write the body themselves
//! (`caldera_actors::config::reference`), since they hold each key's doc
//! text and default in one declaration; this is where it joins the others.
use super::markdown::banner;

pub fn page() -> String {
    let mut out = banner(
        "Server configuration",
        "the config types in `actors/src/config/`",
    );
    out.push_str(&caldera_actors::config::reference::config_reference());
    out
}
