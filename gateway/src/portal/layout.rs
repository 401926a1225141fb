//! The frame of every portal page: head, navigation, who is logged in, the
//! logout form, and the live region its script refreshes in place.
use super::auth::Viewer;
use maud::{html, Markup, PreEscaped, DOCTYPE};

/// The pages of the navigation, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Submit,
    Tasks,
    Nodes,
    Tenants,
    Models,
    Events,
}

impl Nav {
    const ALL: [Nav; 7] = [
        Nav::Overview,
        Nav::Submit,
        Nav::Tasks,
        Nav::Nodes,
        Nav::Tenants,
        Nav::Models,
        Nav::Events,
    ];

    fn href(self) -> &'static str {
        match self {
            Nav::Overview => "/",
            Nav::Submit => "/submit",
            Nav::Tasks => "/tasks",
            Nav::Nodes => "/nodes",
            Nav::Tenants => "/tenants",
            Nav::Models => "/models",
            Nav::Events => "/events",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Nav::Overview => "Overview",
            Nav::Submit => "Submit",
            Nav::Tasks => "Tasks",
            Nav::Nodes => "Nodes",
            Nav::Tenants => "Tenants",
            Nav::Models => "Models",
            Nav::Events => "Events",
        }
    }

    /// The stable id of its link (`nav-tasks`), for the browser test.
    fn id(self) -> String {
        format!("nav-{}", self.label().to_ascii_lowercase())
    }
}

/// How often the live region asks for a fresh copy, ms.
pub const REFRESH_MS: u32 = 5_000;

/// A whole page: `fixed` is rendered once (forms being filled in stay as
/// they are), `live` is the part the script swaps in every
/// [`REFRESH_MS`] from the same URL with `fragment=live`.
pub fn page(viewer: &Viewer, nav: Nav, title: &str, fixed: Markup, live: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Caldera — " (title) }
                link rel="stylesheet" href="/portal/assets/portal.css";
                script src="/portal/assets/portal.js" defer {}
            }
            body data-page=(nav.label().to_ascii_lowercase()) {
                header.top {
                    span.brand { "Caldera" }
                    nav {
                        @for n in Nav::ALL {
                            a id=(n.id()) href=(n.href()) class=[(n == nav).then_some("active")] { (n.label()) }
                        }
                    }
                    span.who #whoami { (viewer.label()) }
                    form.logout method="post" action="/logout" {
                        (csrf_field(viewer))
                        button #logout type="submit" { "Log out" }
                    }
                }
                main {
                    h1 { (title) }
                    (fixed)
                    div #live data-refresh=(REFRESH_MS) { (live) }
                }
            }
        }
    }
}

/// The hidden field every form of a session carries.
pub fn csrf_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="csrf" value=(viewer.csrf()); }
}

/// A number with thousands grouped by thin spaces (1 234 567).
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

/// A duration in ms as a person reads it: 80 ms, 45 s, 12 min, 3.5 h, 2.1 d.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms} ms"),
        1..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{:.1} h", s as f64 / 3600.0),
        _ => format!("{:.1} d", s as f64 / 86_400.0),
    }
}

/// A quantity in MB shown in GB with one decimal (1 GB = 1024 MB, as the
/// spec's `memory_gb` is granted).
pub fn gb(mb: f64) -> String {
    format!("{:.1} GB", mb / 1024.0)
}

/// Inline text that must not be escaped twice (already-rendered SVG).
pub fn raw(s: String) -> Markup {
    PreEscaped(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_group_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_234_567), "1\u{2009}234\u{2009}567");
    }
}
