//! A cost report as CSV (RFC 4180): a header row, then one row per group,
//! CRLF line ends, a field quoted when it holds a comma, a quote or a line
//! break (its quotes doubled). Money in the same exact decimals as the JSON.
use super::cost::{CostLine, CostReport};

/// The header row's columns, in order.
pub const COLUMNS: &[&str] = &[
    "tenant",
    "group_by",
    "key",
    "from",
    "to",
    "currency",
    "allocations",
    "allocated_cost",
    "idle_cost",
    "idle_share",
    "borrowed_cost",
    "guaranteed_cost",
    "gpu_hours",
    "cpu_core_hours",
    "memory_gb_hours",
    "disk_gb_hours",
];

/// One field, quoted when RFC 4180 says it must be.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn row(tenant: &str, rep: &CostReport, currency: &str, g: &CostLine) -> String {
    let cells = [
        tenant.to_string(),
        rep.group_by.as_str().to_string(),
        g.key.clone(),
        caldera_spec::time::rfc3339(rep.from_ms),
        caldera_spec::time::rfc3339(rep.to_ms),
        currency.to_string(),
        g.allocations.to_string(),
        g.allocated.decimal(),
        g.idle.decimal(),
        format!("{:.6}", g.idle_share()),
        g.borrowed.decimal(),
        g.guaranteed.decimal(),
        format!("{:.6}", g.gpu_hours),
        format!("{:.6}", g.cpu_core_hours),
        format!("{:.6}", g.memory_gb_hours),
        format!("{:.6}", g.disk_gb_hours),
    ];
    let mut line: Vec<String> = cells.iter().map(|c| field(c)).collect();
    line.truncate(COLUMNS.len());
    line.join(",") + "\r\n"
}

/// The whole document.
pub fn render(tenant: &str, rep: &CostReport, currency: &str) -> String {
    let mut out = COLUMNS.join(",") + "\r\n";
    for g in &rep.groups {
        out.push_str(&row(tenant, rep, currency, g));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chargeback::cost::GroupBy;
    use crate::chargeback::prices::Micros;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn a_report_is_a_header_and_one_row_per_group() {
        let g = CostLine {
            key: "m:1,beta".into(),
            allocations: 2,
            allocated: Micros(1_500_000),
            ..Default::default()
        };
        let rep = CostReport {
            from_ms: 0,
            to_ms: 1000,
            group_by: GroupBy::Model,
            total: g.clone(),
            groups: vec![g],
        };
        let doc = render("team-a", &rep, "EUR");
        let lines: Vec<&str> = doc.split("\r\n").collect();
        assert_eq!(lines.len(), 3, "{doc:?}");
        assert_eq!(lines[0].split(',').count(), COLUMNS.len());
        assert!(
            lines[1].starts_with("team-a,model,\"m:1,beta\",1970-01-01T00:00:00.000Z,"),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].contains(",EUR,2,1.500000,0.000000,0.000000,"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], "");
    }
}
