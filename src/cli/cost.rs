//! `caldera cost`: what a tenant's allocations cost over a period — a table
//! per group, `--csv` for a spreadsheet, `--json` for scripts. A tenant
//! token reports its own tenant; the operator names one with `--tenant`, or
//! asks for every tenant and the operator-wide total with `--all`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts};
use super::own_tenant::which;
use super::table::Table;
use super::CliError;
use caldera_spec::views::{CostLineView, CostReportView, CostTotalView, PricesView};
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

fn row(l: &CostLineView, key: &str) -> Vec<String> {
    let hours = |h: f64| format!("{h:.4}");
    vec![
        key.to_string(),
        l.allocations.to_string(),
        l.allocated_cost.clone(),
        format!("{} ({:.1}%)", l.idle_cost, l.idle_share * 100.0),
        l.borrowed_cost.clone(),
        l.guaranteed_cost.clone(),
        hours(l.gpu_hours),
        hours(l.cpu_core_hours),
        hours(l.memory_gb_hours),
    ]
}

/// The columns of a cost table after the first.
const COLUMNS: [&str; 8] = [
    "ALLOCS",
    "COST",
    "IDLE",
    "BORROWED",
    "GUARANTEED",
    "GPU-H",
    "CORE-H",
    "GB-H",
];

/// The report as a table, the total last.
pub fn render(data: &CostReportView) -> String {
    let group = data.group_by.to_uppercase();
    let headers: Vec<&str> = std::iter::once(group.as_str()).chain(COLUMNS).collect();
    let mut t = Table::new(&headers);
    for g in &data.groups {
        t.row(row(g, &g.key));
    }
    t.row(row(&data.total, "TOTAL"));
    let mut out = format!(
        "tenant {} from {} to {} ({})\n{}",
        data.tenant,
        data.from,
        data.to,
        data.currency,
        t.render()
    );
    if unpriced(&data.prices) {
        out.push_str(
            "note: the server has no prices configured (price-gpu-hour, price-cpu-core-hour, \
             price-memory-gb-hour, price-disk-gb-hour), so every cost reads 0; the hours are what was held\n",
        );
    }
    out
}

/// Every price in the report's table is zero: costs are 0 whatever was
/// held, which a reader would otherwise take for "nothing was used".
fn unpriced(p: &PricesView) -> bool {
    let zero = |s: &String| s.trim_matches(['0', '.']).is_empty();
    p.gpu_hour.values().all(zero)
        && [&p.cpu_core_hour, &p.memory_gb_hour, &p.disk_gb_hour]
            .into_iter()
            .all(zero)
}

/// The operator's report across tenants: a line per tenant, the total last.
pub fn render_all(data: &CostTotalView) -> String {
    let headers: Vec<&str> = std::iter::once("TENANT").chain(COLUMNS).collect();
    let mut t = Table::new(&headers);
    for l in &data.tenants {
        t.row(row(l, &l.key));
    }
    t.row(row(&data.total, "TOTAL"));
    format!(
        "all tenants from {} to {} ({})\n{}",
        data.from,
        data.to,
        data.currency,
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
        print!("{}", render_all(&read_view(&data)?));
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
            print!("{}", render(&read_view(&data)?));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(key: &str, cost: &str, idle: &str, idle_share: f64) -> Value {
        json!({"key": key, "allocations": 1, "allocated_cost": cost, "idle_cost": idle,
            "idle_share": idle_share, "borrowed_cost": "0.000000", "guaranteed_cost": cost,
            "allocated_cost_micros": 0, "idle_cost_micros": 0, "borrowed_cost_micros": 0,
            "guaranteed_cost_micros": 0, "gpu_hours": 0.5, "cpu_core_hours": 1.0,
            "memory_gb_hours": 2.0, "disk_gb_hours": 0.0})
    }

    fn report(prices: Value) -> CostReportView {
        let l = line("train", "1.200000", "0.600000", 0.5);
        serde_json::from_value(json!({"tenant": "team-a", "from": "f", "to": "t",
            "from_ms": 0, "to_ms": 1, "currency": "EUR", "group_by": "task", "prices": prices,
            "money": "exact", "groups": [l.clone()], "total": l}))
        .expect("a cost report")
    }

    fn prices(gpu: Value) -> Value {
        json!({"gpu_hour": gpu, "cpu_core_hour": "0.000000",
            "memory_gb_hour": "0.000000", "disk_gb_hour": "0.000000"})
    }

    #[test]
    fn a_report_with_no_prices_says_why_every_cost_is_zero() {
        let free = report(prices(json!({"default": "0.000000"})));
        assert!(unpriced(&free.prices));
        assert!(render(&free).contains("no prices configured"));
        let priced = report(prices(json!({"default": "0.000000", "A100": "2.400000"})));
        assert!(!unpriced(&priced.prices));
        assert!(!render(&priced).contains("no prices configured"));
    }

    #[test]
    fn all_tenants_are_a_line_each_and_the_total_last() {
        let d: CostTotalView = serde_json::from_value(json!({"from": "f", "to": "t",
            "from_ms": 0, "to_ms": 1, "currency": "EUR",
            "tenants": [line("acme", "1.000000", "0.000000", 0.0), line("bravo", "2.000000", "0.000000", 0.0)],
            "total": line("total", "3.000000", "0.000000", 0.0)}))
        .expect("a cost total");
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
        let out = render(&report(prices(json!({"default": "1.000000"}))));
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
