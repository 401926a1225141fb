//! `caldera login`: checks a server and token and saves them as a context
//! (see [`super::context`]), so later commands need neither flag.
use super::client::{block_on, print_json, read_view, ApiClient};
use super::context::{self, Context, Contexts};
use super::CliError;
use caldera_spec::views::Whoami;

/// `caldera login --server URL --token T [--name CONTEXT]`
#[derive(clap::Args, Debug)]
pub struct LoginArgs {
    /// Address of the Caldera server.
    #[arg(long, env = "CALDERA_SERVER")]
    pub server: String,
    /// A tenant token, or the operator token.
    #[arg(long, env = "CALDERA_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The context's name [default: the tenant's name, or `operator`].
    #[arg(long)]
    pub name: Option<String>,
    /// Print the saved context as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Who a token belongs to, in words, and the context name that fits it.
fn describe(whoami: &Whoami) -> (String, String) {
    match &whoami.tenant {
        Some(t) => (format!("tenant {t}"), t.to_string()),
        None => ("the operator".to_string(), "operator".to_string()),
    }
}

/// Asks the server who the token is (a wrong token or server fails here,
/// before anything is saved), then saves the context and makes it current.
pub fn run(args: LoginArgs) -> Result<(), CliError> {
    let client = ApiClient::new(&args.server, Some(args.token.clone()));
    let whoami = block_on(client.get("/v1/whoami", &[]))?;
    let (who, default_name) = describe(&read_view(&whoami)?);
    let name = args.name.unwrap_or(default_name);
    let path = context::path().ok_or_else(|| {
        CliError::Failed(
            "no HOME or XDG_CONFIG_HOME to keep contexts in; set CALDERA_CONTEXTS_FILE".into(),
        )
    })?;
    let mut saved = Contexts::load(&path)?;
    saved.set(
        &name,
        Context {
            server: args.server.trim_end_matches('/').to_string(),
            token: Some(args.token),
        },
    );
    saved.save(&path)?;
    if args.json {
        return print_json(&serde_json::json!({
            "context": name, "server": args.server, "whoami": whoami, "file": path.display().to_string()
        }));
    }
    println!(
        "logged in to {} as {who}; context {name:?} saved in {} and made current",
        args.server,
        path.display()
    );
    Ok(())
}
