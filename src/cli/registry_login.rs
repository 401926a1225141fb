//! A tenant's image-registry credentials: `registry-login` sets them (the
//! password read from stdin, never from the command line, where `ps` and the
//! shell history would show it), `registry-logout` deletes them, and
//! `registry-credentials` lists which registries have them and since when.
//! A tenant token means its own tenant; the operator names one with `--tenant`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::own_tenant::which;
use super::table::Table;
use super::CliError;
use caldera_spec::views::{
    RegistryCredentialDeleted, RegistryCredentialList, RegistryCredentialView,
};
use serde_json::json;
use std::io::Read;

/// `caldera registry-login REGISTRY --username U --password-stdin`
#[derive(clap::Args, Debug)]
pub struct LoginArgs {
    /// The registry host, with `:port` where it has one (`registry.internal`).
    pub registry: String,
    #[arg(long, short = 'u')]
    pub username: String,
    /// Read the password (or token) from stdin; the only way to give it.
    #[arg(long)]
    pub password_stdin: bool,
    /// The tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera registry-logout REGISTRY`
#[derive(clap::Args, Debug)]
pub struct LogoutArgs {
    pub registry: String,
    /// The tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera registry-credentials`
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// The tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// The password as given on stdin: everything up to the end, one trailing
/// line break dropped (`echo "$TOKEN" |` adds one).
fn read_password(mut input: impl Read) -> Result<String, CliError> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .map_err(|e| CliError::Failed(format!("reading the password from stdin: {e}")))?;
    let trimmed = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if trimmed.is_empty() {
        return Err(CliError::Usage("no password came on stdin".into()));
    }
    Ok(trimmed.to_string())
}

fn path(tenant: &str, registry: Option<&str>) -> String {
    let base = format!("/v1/tenants/{}/registry-credentials", encode(tenant));
    match registry {
        Some(r) => format!("{base}/{}", encode(r)),
        None => base,
    }
}

/// Sets the credentials.
pub fn login(args: LoginArgs) -> Result<(), CliError> {
    if !args.password_stdin {
        return Err(CliError::Usage(
            "give the password on stdin with --password-stdin (a password on the command line shows in ps and the shell history)".into(),
        ));
    }
    let password = read_password(std::io::stdin().lock())?;
    let client = ApiClient::from_opts(&args.opts)?;
    let body = json!({"username": args.username, "password": password});
    let answer = block_on(async {
        let tenant = which(&client, args.tenant).await?;
        client
            .send_json(Verb::Put, &path(&tenant, Some(&args.registry)), &body)
            .await
            .map(|a| (tenant, a))
    })?;
    let (tenant, answer) = answer;
    if args.opts.json {
        return print_json(&answer.data);
    }
    let set: RegistryCredentialView = read_view(&answer.data)?;
    println!(
        "credentials for {} set for tenant {tenant}; its container tasks pull from it with them",
        set.registry
    );
    Ok(())
}

/// Deletes the credentials.
pub fn logout(args: LogoutArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let data = block_on(async {
        let tenant = which(&client, args.tenant).await?;
        client
            .call(
                Verb::Delete,
                &path(&tenant, Some(&args.registry)),
                &[],
                None,
            )
            .await
    })?
    .data;
    if args.opts.json {
        return print_json(&data);
    }
    let gone: RegistryCredentialDeleted = read_view(&data)?;
    println!("credentials for {} deleted", gone.registry);
    Ok(())
}

/// Lists the registries with credentials.
pub fn list(args: ListArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let data = block_on(async {
        let tenant = which(&client, args.tenant).await?;
        client.get(&path(&tenant, None), &[]).await
    })?;
    if args.opts.json {
        return print_json(&data);
    }
    print!("{}", render(&read_view(&data)?));
    Ok(())
}

fn render(data: &RegistryCredentialList) -> String {
    let mut table = Table::new(&["REGISTRY", "SET AT"]);
    for c in &data.registry_credentials {
        table.row(vec![c.registry.clone(), c.set_at.clone()]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_read_whole_without_its_line_break() {
        assert_eq!(read_password("p:w d\n".as_bytes()).unwrap(), "p:w d");
        assert_eq!(read_password("tok\r\n".as_bytes()).unwrap(), "tok");
        assert_eq!(read_password("a\n\n".as_bytes()).unwrap(), "a\n");
        assert!(matches!(
            read_password("\n".as_bytes()),
            Err(CliError::Usage(_))
        ));
    }

    #[test]
    fn the_list_shows_registries_and_when() {
        let data = RegistryCredentialList {
            tenant: "acme".into(),
            registry_credentials: vec![RegistryCredentialView {
                registry: "registry.internal".into(),
                set_at: "2026-12-03T15:00:00Z".into(),
                set_at_ms: 1,
            }],
        };
        assert_eq!(
            render(&data),
            "REGISTRY           SET AT\nregistry.internal  2026-12-03T15:00:00Z\n"
        );
    }
}
