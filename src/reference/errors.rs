//! `errors.md`: every code of the one registry (`caldera_spec::codes`), with
//! the HTTP status it is answered with and what it means.
use super::markdown::{banner, cell, code, table};
use caldera_spec::codes::ALL;

pub fn page() -> String {
    let mut out = banner("Error codes", "the registry in `spec/src/codes.rs`");
    out.push_str(
        "Every error Caldera answers with, prints or logs has one stable code. \
`4SSxx` and `5SSxx` are answers of the HTTP API whose first three digits are the \
HTTP status (`40400` is a 404); `1PPxx` are errors of a process, printed or logged and \
never an HTTP answer: `100xx` the control plane, `101xx` the node agent, `102xx` a \
workload the agent could not start, `103xx` the placement engine, `104xx` \
`caldera sim`'s trace loading.\n\n",
    );
    let rows: Vec<Vec<String>> = ALL
        .iter()
        .map(|e| {
            vec![
                e.code.to_string(),
                code(e.name),
                if e.http_status == 0 {
                    "—".into()
                } else {
                    e.http_status.to_string()
                },
                cell(e.meaning),
            ]
        })
        .collect();
    out.push_str(&table(&["code", "name", "HTTP status", "meaning"], &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page is the registry: one row per code, each with a meaning.
    #[test]
    fn every_registered_code_has_a_row_with_its_status_and_meaning() {
        let page = page();
        for e in ALL {
            assert!(!e.meaning.trim().is_empty(), "{} has no meaning", e.code);
            let status = if e.http_status == 0 {
                "—".to_string()
            } else {
                e.http_status.to_string()
            };
            let row = format!("| {} | `{}` | {status} |", e.code, e.name);
            assert!(page.contains(&row), "no row {row}");
        }
        assert_eq!(
            page.lines()
                .filter(|l| l.starts_with("| 1") || l.starts_with("| 4") || l.starts_with("| 5"))
                .count(),
            ALL.len()
        );
    }
}
