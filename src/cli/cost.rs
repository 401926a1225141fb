//! `caldera cost`: what a tenant's allocations cost over a period — a table
//! per group, `--csv` for a spreadsheet, `--json` for scripts. A tenant
//! token reports its own tenant; the operator names one with `--tenant`, or
//! asks for every tenant and the operator-wide total with `--all`.
use super::client::{block_on, encode, print_json, ApiClient, ClientOpts};
use super::fields::{items, number, text};
use super::own_tenant::which;
use super::table::Table;
use super::CliError;
use serde_json::Value;

/// `caldera cost [--tenant T] [--from F --to T] [--group-by task|model|day] [--csv]`
#[derive(clap::Args, Debug)]
pub struct CostArgs {
    /// The tenant (operator token); a tenant token means its own.
    #[arg(long, conflicts_with = "all")]
    pub tenant: Option<String>,
    /// Every tenant, one line each, and the total across them (operator token).
    #[arg(long, conflicts_with_all = ["csv", "group_by"])]
    pub all: bool,
    /// Start of the period: RFC 3339 or Unix ms [default: the 1st of this month, UTC].
    #[arg(long)]
    pub from: Option<String>,
    /// End of the period: RFC 3339 or Unix ms [default: now].
    #[arg(long)]
    pub to: Option<String>,
    /// One line per task, model version or UTC day.
    #[arg(long, value_parser = ["task", "model", "day"], default_value = "task")]
    pub group_by: String,
    /// Print the server's CSV (a header row, one row per group).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

fn row(l: &Value, key: &str) -> Vec<String> {
    let share = number(l, "idle_share").map_or("-".into(), |s| format!("{:.1}%", s * 100.0));
    let hours = |k: &str| number(l, k).map_or("-".into(), |h| format!("{h:.4}"));
    vec![
        key.to_string(),
        text(l, "allocations"),
        text(l, "allocated_cost"),
        format!("{} ({share})", text(l, "idle_cost")),
        text(l, "borrowed_cost"),
        text(l, "guaranteed_cost"),
        hours("gpu_hours"),
        hours("cpu_core_hours"),
        hours("memory_gb_hours"),
    ]
}

/// The report as a table, the total last.
pub fn render(data: &Value) -> String {
    let mut t = Table::new(&[
        text(data, "group_by").to_uppercase().as_str(),
        "ALLOCS",
        "COST",
        "IDLE",
        "BORROWED",
        "GUARANTEED",
        "GPU-H",
        "CORE-H",
        "GB-H",
    ]);
    for g in items(data, "groups") {
        t.row(row(g, &text(g, "key")));
    }
    if let Some(total) = data.get("total") {
        t.row(row(total, "TOTAL"));
    }
    let mut out = format!(
        "tenant {} from {} to {} ({})\n{}",
        text(data, "tenant"),
        text(data, "from"),
        text(data, "to"),
        text(data, "currency"),
        t.render()
    );
    if unpriced(data) {
        out.push_str(
            "note: the server has no prices configured (price-gpu-hour, price-cpu-core-hour, \
             price-memory-gb-hour, price-disk-gb-hour), so every cost reads 0; the hours are what was held\n",
        );
    }
    out
}

/// Every price in the report's table is zero: costs are 0 whatever was
/// held, which a reader would otherwise take for "nothing was used".
fn unpriced(data: &Value) -> bool {
    let Some(p) = data.get("prices") else {
        return false;
    };
    let zero = |v: &Value| {
        v.as_str()
            .is_some_and(|s| s.trim_matches(['0', '.']).is_empty())
    };
    let gpu_free = p["gpu_hour"]
        .as_object()
        .is_none_or(|m| m.values().all(zero));
    gpu_free
        && ["cpu_core_hour", "memory_gb_hour", "disk_gb_hour"]
            .iter()
            .all(|k| zero(&p[*k]))
}

/// The operator's report across tenants: a line per tenant, the total last.
pub fn render_all(data: &Value) -> String {
    let mut t = Table::new(&[
        "TENANT",
        "ALLOCS",
        "COST",
        "IDLE",
        "BORROWED",
        "GUARANTEED",
        "GPU-H",
        "CORE-H",
        "GB-H",
    ]);
    for l in items(data, "tenants") {
        t.row(row(l, &text(l, "key")));
    }
    if let Some(total) = data.get("total") {
        t.row(row(total, "TOTAL"));
    }
    format!(
        "all tenants from {} to {} ({})\n{}",
        text(data, "from"),
        text(data, "to"),
        text(data, "currency"),
        t.render()
    )
}

pub fn run(args: CostArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    if args.all {
        let mut query = Vec::new();
        query.extend(args.from.clone().map(|f| ("from", f)));
        query.extend(args.to.clone().map(|t| ("to", t)));
        let data = block_on(client.get("/v1/cost", &query))?;
        if args.opts.json {
            return print_json(&data);
        }
        print!("{}", render_all(&data));
        return Ok(());
    }
    let mut query = vec![("group_by", args.group_by.clone())];
    query.extend(args.from.clone().map(|f| ("from", f)));
    query.extend(args.to.clone().map(|t| ("to", t)));
    let csv = args.csv;
    let answer = block_on(async {
        let name = which(&client, args.tenant).await?;
        let path = format!("/v1/tenants/{}/cost", encode(&name));
        if csv {
            client.get_csv(&path, &query).await.map(Value::String)
        } else {
            client.get(&path, &query).await
        }
    })?;
    match answer {
        Value::String(doc) => {
            print!("{doc}");
            Ok(())
        }
        data if args.opts.json => print_json(&data),
        data => {
            print!("{}", render(&data));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_report_with_no_prices_says_why_every_cost_is_zero() {
        let free = json!({"prices": {"gpu_hour": {"default": "0.000000"}, "cpu_core_hour": "0.000000",
            "memory_gb_hour": "0.000000", "disk_gb_hour": "0.000000"}});
        assert!(unpriced(&free));
        assert!(render(&free).contains("no prices configured"));
        let priced = json!({"prices": {"gpu_hour": {"default": "0.000000", "A100": "2.400000"},
            "cpu_core_hour": "0.000000", "memory_gb_hour": "0.000000", "disk_gb_hour": "0.000000"}});
        assert!(!unpriced(&priced));
        assert!(!render(&priced).contains("no prices configured"));
    }

    #[test]
    fn all_tenants_are_a_line_each_and_the_total_last() {
        let l = |k: &str, c: &str| {
            json!({"key": k, "allocations": 1, "allocated_cost": c, "idle_cost": "0.000000",
            "idle_share": 0.0, "borrowed_cost": "0.000000", "guaranteed_cost": c, "gpu_hours": 0.5,
            "cpu_core_hours": 1.0, "memory_gb_hours": 2.0})
        };
        let d = json!({"from": "f", "to": "t", "currency": "EUR",
            "tenants": [l("acme", "1.000000"), l("bravo", "2.000000")], "total": l("total", "3.000000")});
        let out = render_all(&d);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("all tenants") && lines[0].contains("EUR"),
            "{out}"
        );
        assert!(lines[1].starts_with("TENANT"), "{out}");
        assert!(
            lines[2].starts_with("acme") && lines[2].contains("1.000000"),
            "{out}"
        );
        assert!(lines[3].starts_with("bravo"), "{out}");
        assert!(
            lines[4].starts_with("TOTAL") && lines[4].contains("3.000000"),
            "{out}"
        );
    }

    #[test]
    fn the_table_has_a_line_per_group_and_the_total_last() {
        let l = json!({"key": "train", "allocations": 1, "allocated_cost": "1.200000", "idle_cost": "0.600000",
            "idle_share": 0.5, "borrowed_cost": "0.000000", "guaranteed_cost": "1.200000", "gpu_hours": 0.5,
            "cpu_core_hours": 1.0, "memory_gb_hours": 2.0});
        let d = json!({"tenant": "team-a", "from": "f", "to": "t", "currency": "EUR", "group_by": "task",
            "groups": [l.clone()], "total": l});
        let out = render(&d);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].contains("team-a") && lines[0].contains("EUR"),
            "{out}"
        );
        assert!(lines[1].starts_with("TASK"), "{out}");
        assert!(
            lines[2].starts_with("train") && lines[2].contains("0.600000 (50.0%)"),
            "{out}"
        );
        assert!(lines[3].starts_with("TOTAL"), "{out}");
    }
}
