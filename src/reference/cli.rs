//! `cli.md`: every command and subcommand of the `caldera` binary, with each
//! argument's flag, value, default, environment variable and help, walked
//! from the clap definition the binary parses its command line with.
use super::markdown::{banner, cell, code, table};
use clap::{Arg, ArgAction, Command};

pub fn page(mut cli: Command) -> String {
    // Building fills in what the derive leaves implicit (the usage lines).
    cli.build();
    let mut out = banner(
        "Command line",
        "the clap definition of the `caldera` binary (`src/cli/`)",
    );
    out.push_str(
        "Every command of `caldera`; `caldera <command> --help` prints the same text. \
A flag with an environment variable takes its value from that variable when the \
flag is not given.\n\n",
    );
    let name = cli.get_name().to_string();
    command(&mut out, &cli, &name, 2);
    out
}

/// `cmd` (reached as `path`) and then each of its visible subcommands.
fn command(out: &mut String, cmd: &Command, path: &str, depth: usize) {
    out.push_str(&format!("{} `{path}`\n\n", "#".repeat(depth.min(6))));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        out.push_str(&paragraphs(&about.to_string()));
    }
    let usage = cmd
        .clone()
        .render_usage()
        .to_string()
        .trim_start_matches("Usage: ")
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n");
    out.push_str(&format!("```\n{usage}\n```\n\n"));
    let rows: Vec<Vec<String>> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !is_builtin(a))
        .map(argument)
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["argument", "value", "default", "environment", "meaning"],
            &rows,
        ));
        out.push('\n');
    }
    let subs: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        let list: Vec<Vec<String>> = subs
            .iter()
            .map(|s| {
                vec![
                    code(&format!("{path} {}", s.get_name())),
                    cell(&s.get_about().map(|a| a.to_string()).unwrap_or_default()),
                ]
            })
            .collect();
        out.push_str(&table(&["command", "what it does"], &list));
        out.push('\n');
        for s in subs {
            command(out, s, &format!("{path} {}", s.get_name()), depth + 1);
        }
    }
}

/// `--help` and `--version`: clap's own, the same on every command.
fn is_builtin(a: &Arg) -> bool {
    matches!(
        a.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    )
}

/// One row: how the argument is written, its value, default, variable, help.
fn argument(a: &Arg) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(s) = a.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = a.get_long() {
        names.push(format!("--{l}"));
    }
    let written = if a.is_positional() {
        format!("`<{}>`", value_name(a))
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
    let value = if a.is_positional() || !takes_value {
        "—".to_string()
    } else {
        let possible: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|p| !p.is_hide_set())
            .map(|p| p.get_name().to_string())
            .collect();
        if possible.is_empty() || a.get_value_names().is_some() {
            code(&value_name(a))
        } else {
            code(&possible.join("\\|"))
        }
    };
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let default = if !takes_value {
        "—".to_string()
    } else {
        code(&defaults.join(","))
    };
    let env = a
        .get_env()
        .map(|e| code(&e.to_string_lossy()))
        .unwrap_or_else(|| "—".into());
    let mut help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    if a.is_required_set() {
        help = format!("Required. {help}");
    }
    vec![written, value, default, env, cell(&help)]
}

/// The argument's value placeholder, as `--help` shows it.
fn value_name(a: &Arg) -> String {
    match a.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        None => a.get_id().as_str().to_uppercase(),
    }
}

/// Help text as Markdown paragraphs (clap keeps the doc comment's blank lines).
fn paragraphs(text: &str) -> String {
    let mut out = String::new();
    for p in text.split("\n\n") {
        let p = p.trim();
        if !p.is_empty() {
            out.push_str(p);
            out.push_str("\n\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// A small command line with each kind of argument the page shows.
    #[derive(Parser)]
    #[command(name = "tool", about = "A tool.")]
    struct Tool {
        #[command(subcommand)]
        cmd: Sub,
    }

    #[derive(clap::Subcommand)]
    enum Sub {
        /// Runs it.
        Run {
            /// Where it listens.
            #[arg(
                long,
                default_value = "127.0.0.1:1",
                env = "TOOL_LISTEN",
                value_name = "ADDR"
            )]
            listen: String,
            /// Say more.
            #[arg(short, long)]
            verbose: bool,
            /// The file.
            file: String,
        },
        #[command(hide = true)]
        Secret,
    }

    #[test]
    fn every_visible_command_and_argument_has_its_row() {
        let page = page(<Tool as clap::CommandFactory>::command());
        assert!(page.contains("## `tool`\n\nA tool.\n\n"), "{page}");
        // clap drops a one-line doc comment's final period, as `--help` shows it.
        assert!(page.contains("### `tool run`\n\nRuns it\n\n"), "{page}");
        assert!(
            page.contains(
                "| `--listen` | `ADDR` | `127.0.0.1:1` | `TOOL_LISTEN` | Where it listens |"
            ),
            "{page}"
        );
        assert!(
            page.contains("| `-v`, `--verbose` | — | — | — | Say more |"),
            "{page}"
        );
        assert!(
            page.contains("| `<FILE>` | — | — | — | Required. The file |"),
            "{page}"
        );
        assert!(
            !page.contains("secret"),
            "a hidden command is not listed: {page}"
        );
        assert!(
            !page.contains("| `-h`, `--help`") && !page.contains("`--version`"),
            "clap's own flags are not listed: {page}"
        );
    }
}
