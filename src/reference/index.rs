//! `README.md` of the reference directory: what each page is generated from
//! and how to regenerate them.

pub fn page(files: &[&str]) -> String {
    let mut out = super::markdown::banner("Reference", "the code, as listed below");
    out.push_str(
        "Every page here is generated from the code that defines what it describes, so \
it says what the product does now. Do not edit them by hand: change the code, then \
regenerate.\n\n",
    );
    for file in files {
        let (what, from) = source(file);
        out.push_str(&format!("- [{file}]({file}): {what}, from {from}.\n"));
    }
    out.push_str(&format!(
        "\n## Regenerate\n\n```\n{}\n```\n\n\
runs `caldera reference docs/reference` from the test build (the same as \
`CALDERA_UPDATE_REFERENCE=1 cargo test --test it reference::`). The test \
`reference::the_reference_pages_are_what_the_code_generates` in `tests/it/reference.rs` \
runs `caldera reference --check docs/reference` and fails, naming each page that \
differs, when a page is not what the code generates now; `cargo test --workspace` \
(and so `.ci/run`) runs it.\n",
        super::REGENERATE
    ));
    out
}

/// What a page lists and where it is generated from.
fn source(file: &str) -> (&'static str, &'static str) {
    match file {
        "cli.md" => (
            "every command, subcommand and flag of `caldera`, with defaults and environment variables",
            "the clap definition (`src/cli/`)",
        ),
        "config.md" => (
            "every key of the server's configuration and its default",
            "the config types (`actors/src/config`)",
        ),
        "errors.md" => (
            "every error code with its HTTP status and meaning",
            "the registry (`spec/src/codes.rs`)",
        ),
        "http-api.md" => (
            "every operation of the HTTP API: method, path, who may call it, parameters, bodies, answers",
            "the OpenAPI document served at `/openapi.json` (`gateway/src/openapi/`)",
        ),
        "metrics.md" => (
            "every metric family `/metrics` exposes: name, type, unit, labels, help",
            "the registries `/metrics` encodes (`actors/src/metrics.rs`, `gateway/src/metrics/`)",
        ),
        _ => ("a generated page", "the code"),
    }
}
