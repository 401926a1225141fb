//! A tenant's view of itself: `caldera quota show` and `caldera usage`. A
//! tenant token needs no name (the server says whose it is, `/v1/whoami`);
//! the operator names the tenant with `--tenant`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts};
use super::display::{quota_text, trim_decimal};
use super::table::key_values;
use super::CliError;
use caldera_spec::views::{TenantUsageView, TenantView, UsagePair, Whoami};
use caldera_spec::Usage;

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
    let me: Whoami = read_view(&client.get("/v1/whoami", &[]).await?)?;
    match me.tenant {
        Some(t) => Ok(t),
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
    let rec: TenantView = read_view(&rec)?;
    print!(
        "{}",
        key_values(&[
            ("tenant", rec.name.clone()),
            ("guaranteed", quota_text(&rec.guaranteed)),
            ("borrowing limit", quota_text(&rec.borrowing_limit)),
        ])
    );
    Ok(())
}

/// One dimension of a usage sample as "allocated / used".
fn pair(sample: &UsagePair, dim: fn(&Usage) -> f64, unit: &str) -> String {
    let of = |u: &Usage| format!("{}{unit}", trim_decimal(dim(u)));
    format!(
        "{} allocated, {} used",
        of(&sample.allocated),
        of(&sample.used)
    )
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
    let data: TenantUsageView = read_view(&data)?;
    let Some(now) = &data.current else {
        println!("tenant {}: no usage recorded yet", data.tenant);
        return Ok(());
    };
    print!(
        "{}",
        key_values(&[
            ("tenant", data.tenant.clone()),
            ("gpus", pair(now, |u| u.gpus, "")),
            ("gpu memory", pair(now, |u| u.gpu_memory_gb, " GB")),
            ("cpu cores", pair(now, |u| u.cpu_cores, "")),
            ("memory", pair(now, |u| u.memory_gb, " GB")),
            ("note", data.note.clone()),
        ])
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_dimension_reads_allocated_then_used() {
        let s = UsagePair {
            allocated: Usage {
                gpus: 1.5,
                ..Usage::default()
            },
            used: Usage {
                gpus: 0.3,
                ..Usage::default()
            },
        };
        assert_eq!(pair(&s, |u| u.gpus, ""), "1.5 allocated, 0.3 used");
        assert_eq!(pair(&s, |u| u.cpu_cores, ""), "0 allocated, 0 used");
    }
}
