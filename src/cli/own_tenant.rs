//! A tenant's view of itself: `caldera quota show` and `caldera usage`. A
//! tenant token needs no name (the server says whose it is, `/v1/whoami`);
//! the operator names the tenant with `--tenant`.
use super::client::{block_on, encode, print_json, ApiClient, ClientOpts};
use super::fields::{get, number, text, trim_decimal};
use super::table::key_values;
use super::tenants::quota_text;
use super::CliError;
use serde_json::Value;

/// `caldera usage [--tenant NAME]`
#[derive(clap::Args, Debug)]
pub struct UsageArgs {
    /// The tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// The tenant a command is about: `named`, else the token's own.
pub async fn which(client: &ApiClient, named: Option<String>) -> Result<String, CliError> {
    if let Some(t) = named {
        return Ok(t);
    }
    let me = client.get("/v1/whoami", &[]).await?;
    match me.get("tenant").and_then(Value::as_str) {
        Some(t) => Ok(t.to_string()),
        None => Err(CliError::Usage(
            "the operator token belongs to no tenant: name one with --tenant".into(),
        )),
    }
}

/// `caldera quota show`: the guarantee and the borrowing limit.
pub fn show_quota(tenant: Option<String>, opts: &ClientOpts) -> Result<(), CliError> {
    let client = ApiClient::from_opts(opts)?;
    let rec = block_on(async {
        let name = which(&client, tenant).await?;
        client
            .get(&format!("/v1/tenants/{}", encode(&name)), &[])
            .await
    })?;
    if opts.json {
        return print_json(&rec);
    }
    print!(
        "{}",
        key_values(&[
            ("tenant", text(&rec, "name")),
            ("guaranteed", quota_text(get(&rec, "guaranteed"))),
            ("borrowing limit", quota_text(get(&rec, "borrowing_limit"))),
        ])
    );
    Ok(())
}

/// One dimension of a usage sample as "allocated / used".
fn pair(sample: &Value, key: &str, unit: &str) -> String {
    let of = |side: &str| {
        number(sample, &format!("{side}.{key}"))
            .map(|x| format!("{}{unit}", trim_decimal(x)))
            .unwrap_or_else(|| "-".into())
    };
    format!("{} allocated, {} used", of("allocated"), of("used"))
}

/// `caldera usage`: what the tenant holds now against what it uses.
pub fn usage(args: UsageArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let data = block_on(async {
        let name = which(&client, args.tenant).await?;
        client
            .get(&format!("/v1/tenants/{}/usage", encode(&name)), &[])
            .await
    })?;
    if args.opts.json {
        return print_json(&data);
    }
    let Some(now) = get(&data, "current") else {
        println!("tenant {}: no usage recorded yet", text(&data, "tenant"));
        return Ok(());
    };
    print!(
        "{}",
        key_values(&[
            ("tenant", text(&data, "tenant")),
            ("gpus", pair(now, "gpus", "")),
            ("gpu memory", pair(now, "gpu_memory_gb", " GB")),
            ("cpu cores", pair(now, "cpu_cores", "")),
            ("memory", pair(now, "memory_gb", " GB")),
            ("note", text(&data, "note")),
        ])
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_usage_dimension_reads_allocated_then_used() {
        let s = json!({"allocated": {"gpus": 1.5}, "used": {"gpus": 0.3}});
        assert_eq!(pair(&s, "gpus", ""), "1.5 allocated, 0.3 used");
        assert_eq!(pair(&s, "cpu_cores", ""), "- allocated, - used");
    }
}
