//! Tenant commands (operator token): `tenant create`, `tenant list`, `quota set`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::display::{or_missing, quota_text};
use super::table::Table;
use super::CliError;
use caldera_spec::tenant::Quota;
use caldera_spec::views::{TenantList, TenantView};
use serde_json::Value;

/// `caldera tenant ...`
#[derive(clap::Args, Debug)]
pub struct TenantArgs {
    #[command(subcommand)]
    pub action: TenantAction,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// What to do with tenants.
#[derive(clap::Subcommand, Debug)]
pub enum TenantAction {
    /// Create a tenant; its token is printed once and cannot be shown again.
    Create(TenantCreateArgs),
    /// List tenants and their quotas.
    List,
}

/// `caldera tenant create NAME [--quota-gpus N ...]`
#[derive(clap::Args, Debug)]
pub struct TenantCreateArgs {
    /// Tenant name.
    pub name: String,
    /// GPUs the tenant may hold (a share counts as its fraction). Default: unlimited.
    #[arg(long, value_parser = non_negative)]
    pub quota_gpus: Option<f64>,
    /// GPU memory, GB. Default: unlimited.
    #[arg(long, value_parser = non_negative)]
    pub quota_gpu_memory_gb: Option<f64>,
    /// CPU cores. Default: unlimited.
    #[arg(long, value_parser = non_negative)]
    pub quota_cpu_cores: Option<f64>,
    /// Memory, GB. Default: unlimited.
    #[arg(long, value_parser = non_negative)]
    pub quota_memory_gb: Option<f64>,
    /// Disk, GB. Default: unlimited.
    #[arg(long, value_parser = non_negative)]
    pub quota_disk_gb: Option<f64>,
}

/// `caldera quota ...`
#[derive(clap::Args, Debug)]
pub struct QuotaArgs {
    #[command(subcommand)]
    pub action: QuotaAction,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// What to do with quotas.
#[derive(clap::Subcommand, Debug)]
pub enum QuotaAction {
    /// Show a tenant's guarantee and borrowing limit (a tenant token: its own).
    Show(QuotaShowArgs),
    /// Replace a tenant's guarantee (and, with `--borrowing-*`, its
    /// borrowing limit); a dimension left out is unlimited.
    Set(QuotaSetArgs),
}

/// `caldera quota show [--tenant NAME]`
#[derive(clap::Args, Debug)]
pub struct QuotaShowArgs {
    /// The tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
}

/// `caldera quota set TENANT [--gpus N] [--gpu-memory-gb N] ...`
#[derive(clap::Args, Debug)]
pub struct QuotaSetArgs {
    /// Tenant name.
    pub tenant: String,
    /// GPUs (a share counts as its fraction).
    #[arg(long, value_parser = non_negative)]
    pub gpus: Option<f64>,
    /// GPU memory, GB.
    #[arg(long, value_parser = non_negative)]
    pub gpu_memory_gb: Option<f64>,
    /// CPU cores.
    #[arg(long, value_parser = non_negative)]
    pub cpu_cores: Option<f64>,
    /// Memory, GB.
    #[arg(long, value_parser = non_negative)]
    pub memory_gb: Option<f64>,
    /// Disk, GB.
    #[arg(long, value_parser = non_negative)]
    pub disk_gb: Option<f64>,
    /// GPUs of one model, e.g. `--gpus-by-model A100=4` (repeatable).
    #[arg(long, value_parser = model_limit)]
    pub gpus_by_model: Vec<(String, f64)>,
    /// Borrowing limit: GPUs it may borrow beyond its guarantee while others idle.
    #[arg(long, value_parser = non_negative)]
    pub borrowing_gpus: Option<f64>,
    /// Borrowing limit: GPU memory, GB.
    #[arg(long, value_parser = non_negative)]
    pub borrowing_gpu_memory_gb: Option<f64>,
    /// Borrowing limit: CPU cores.
    #[arg(long, value_parser = non_negative)]
    pub borrowing_cpu_cores: Option<f64>,
    /// Borrowing limit: memory, GB.
    #[arg(long, value_parser = non_negative)]
    pub borrowing_memory_gb: Option<f64>,
    /// Borrowing limit: disk, GB.
    #[arg(long, value_parser = non_negative)]
    pub borrowing_disk_gb: Option<f64>,
}

/// Why a quota flag's value was refused; clap prints it after the flag's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaValueError {
    /// A per-model GPU quota not written `MODEL=N`.
    #[error("expected MODEL=N, not {0:?}")]
    NotModelAmount(String),
    /// An amount that is not a finite number, or is below zero.
    #[error("`{0}` is not a number >= 0")]
    NotAnAmount(String),
}

/// Parses `MODEL=N` for per-model GPU quotas.
fn model_limit(s: &str) -> Result<(String, f64), QuotaValueError> {
    let (model, n) = s
        .split_once('=')
        .ok_or_else(|| QuotaValueError::NotModelAmount(s.to_string()))?;
    let n = non_negative(n)?;
    if model.trim().is_empty() {
        return Err(QuotaValueError::NotModelAmount(s.to_string()));
    }
    Ok((model.trim().to_string(), n))
}

/// Runs a `tenant` subcommand.
pub fn tenant(args: TenantArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    match args.action {
        TenantAction::Create(create) => {
            let quota = Quota {
                gpus: create.quota_gpus,
                gpu_memory_gb: create.quota_gpu_memory_gb,
                cpu_cores: create.quota_cpu_cores,
                memory_gb: create.quota_memory_gb,
                disk_gb: create.quota_disk_gb,
                ..Quota::default()
            };
            let mut body = serde_json::json!({ "name": create.name });
            if quota != Quota::default() {
                body["quota"] = to_json(&quota)?;
            }
            let tenant = block_on(client.send_json(Verb::Post, "/v1/tenants", &body))?.data;
            if args.opts.json {
                return print_json(&tenant);
            }
            let tenant: TenantView = read_view(&tenant)?;
            println!("tenant {} created", tenant.name);
            println!("token: {}", or_missing(tenant.token.as_deref()));
            println!("quota: {}", quota_text(&tenant.quota));
            eprintln!("(the token is shown only now: keep it)");
            Ok(())
        }
        TenantAction::List => {
            let data = block_on(client.get("/v1/tenants", &[]))?;
            if args.opts.json {
                return print_json(&data);
            }
            print!("{}", render_tenants(&read_view(&data)?));
            Ok(())
        }
    }
}

/// Runs a `quota` subcommand.
pub fn quota(args: QuotaArgs) -> Result<(), CliError> {
    let set = match args.action {
        QuotaAction::Show(show) => return super::own_tenant::show_quota(show.tenant, &args.opts),
        QuotaAction::Set(set) => set,
    };
    let client = ApiClient::from_opts(&args.opts)?;
    let quota = Quota {
        gpus: set.gpus,
        gpu_memory_gb: set.gpu_memory_gb,
        cpu_cores: set.cpu_cores,
        memory_gb: set.memory_gb,
        disk_gb: set.disk_gb,
        gpus_by_model: set.gpus_by_model.iter().cloned().collect(),
    };
    let borrowing = Quota {
        gpus: set.borrowing_gpus,
        gpu_memory_gb: set.borrowing_gpu_memory_gb,
        cpu_cores: set.borrowing_cpu_cores,
        memory_gb: set.borrowing_memory_gb,
        disk_gb: set.borrowing_disk_gb,
        ..Quota::default()
    };
    if quota == Quota::default() && borrowing == Quota::default() {
        return Err(CliError::Usage(
            "give at least one of --gpus, --gpu-memory-gb, --cpu-cores, --memory-gb, --disk-gb, \
             --gpus-by-model or a --borrowing-* limit"
                .into(),
        ));
    }
    let mut body = serde_json::json!({});
    if quota != Quota::default() {
        body["guaranteed"] = to_json(&quota)?;
    }
    if borrowing != Quota::default() {
        body["borrowing_limit"] = to_json(&borrowing)?;
    }
    let path = format!("/v1/tenants/{}/quota", encode(&set.tenant));
    let answer = block_on(client.send_json(Verb::Put, &path, &body))?.data;
    if args.opts.json {
        return print_json(&answer);
    }
    let tenant: TenantView = read_view(&answer)?;
    println!(
        "quota of {}: {}; borrowing limit: {}",
        tenant.name,
        quota_text(&tenant.quota),
        quota_text(&tenant.borrowing_limit)
    );
    Ok(())
}

fn to_json(quota: &Quota) -> Result<Value, CliError> {
    serde_json::to_value(quota).map_err(|e| CliError::Failed(format!("encoding the quota: {e}")))
}

/// Parses a quota amount: a finite number, zero or more.
fn non_negative(raw: &str) -> Result<f64, QuotaValueError> {
    match raw.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(QuotaValueError::NotAnAmount(raw.to_string())),
    }
}

/// The `tenant list` table.
pub fn render_tenants(list: &TenantList) -> String {
    let mut table = Table::new(&["NAME", "QUOTA"]);
    for tenant in &list.tenants {
        table.row(vec![tenant.name.clone(), quota_text(&tenant.quota)]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A bad quota flag names its kind; the words are what clap prints
    /// after the flag.
    #[test]
    fn a_bad_quota_value_says_what_was_expected() {
        assert_eq!(model_limit(" A100 =4"), Ok(("A100".to_string(), 4.0)));
        assert_eq!(
            model_limit("=4"),
            Err(QuotaValueError::NotModelAmount("=4".into()))
        );
        assert_eq!(
            model_limit("A100").map_err(|e| e.to_string()),
            Err("expected MODEL=N, not \"A100\"".into())
        );
        assert_eq!(
            non_negative("-1").map_err(|e| e.to_string()),
            Err("`-1` is not a number >= 0".into())
        );
        assert_eq!(
            model_limit("A100=inf"),
            Err(QuotaValueError::NotAnAmount("inf".into()))
        );
    }

    fn quota(v: serde_json::Value) -> Quota {
        serde_json::from_value(v).expect("a quota")
    }

    #[test]
    fn quotas_read_as_one_line() {
        let q = quota(json!({"gpus": 8, "gpu_memory_gb": 640, "memory_gb": 0.5}));
        assert_eq!(quota_text(&q), "gpus 8, gpu memory 640 GB, memory 0.5 GB");
        assert_eq!(quota_text(&Quota::default()), "no limits");
        let per_model = quota(json!({"gpus_by_model": {"A100": 4}}));
        assert_eq!(quota_text(&per_model), "A100 gpus 4");
    }

    #[test]
    fn amounts_must_be_finite_and_not_negative() {
        assert_eq!(non_negative("2.5"), Ok(2.5));
        assert_eq!(non_negative("0"), Ok(0.0));
        assert!(non_negative("-1").is_err());
        assert!(non_negative("inf").is_err());
        assert!(non_negative("lots").is_err());
    }

    #[test]
    fn the_tenant_list_is_a_row_per_tenant_with_its_guarantee() {
        let list: TenantList = serde_json::from_value(json!({"tenants": [
            {"name": "demo", "quota": {"gpus": 4}, "guaranteed": {"gpus": 4},
             "borrowing_limit": {}, "created_at": "2026-11-29T10:00:00Z"},
            {"name": "a", "quota": {}, "guaranteed": {}, "borrowing_limit": {},
             "created_at": "2026-11-29T10:00:00Z"}]}))
        .expect("a tenant list");
        assert_eq!(
            render_tenants(&list),
            "NAME  QUOTA\ndemo  gpus 4\na     no limits\n"
        );
    }
}
