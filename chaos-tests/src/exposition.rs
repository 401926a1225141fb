//! A strict reader of the OpenMetrics text format (what `/metrics` serves),
//! in the spirit of `promtool check metrics`: tests parse the live output
//! with it, so a malformed exposition fails a test instead of a Prometheus
//! scrape. It checks what a scraper relies on:
//! - every family is announced by `# TYPE` (a known type) and `# HELP`
//!   before its samples, once, and its lines are contiguous;
//! - a `# UNIT` is the suffix of its family's name;
//! - sample names fit their family's type (`_total` for a counter,
//!   `_bucket`/`_sum`/`_count` for a histogram, ...), names and labels are
//!   well formed, values are numbers, no series appears twice;
//! - a histogram's buckets are cumulative, end in `le="+Inf"`, and that
//!   bucket equals `_count`;
//! - the exposition ends with `# EOF`.
use std::collections::{BTreeMap, BTreeSet};

/// A sample's labels, in the order written.
pub type Labels = Vec<(String, String)>;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

/// One metric family.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Family {
    pub kind: String,
    pub help: Option<String>,
    pub unit: Option<String>,
    pub samples: Vec<Sample>,
}

/// A parsed, checked exposition: families by name.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
}

const TYPES: [&str; 8] = [
    "counter",
    "gauge",
    "histogram",
    "gaugehistogram",
    "summary",
    "info",
    "stateset",
    "unknown",
];

impl Exposition {
    /// Every sample, of every family.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.families.values().flat_map(|f| f.samples.iter())
    }

    /// The names samples are exposed under (`x_total`, `x_bucket`, ...).
    pub fn sample_names(&self) -> BTreeSet<&str> {
        self.samples().map(|s| s.name.as_str()).collect()
    }

    /// The value of the series `name` whose labels include all of `labels`
    /// (the first such series), if any.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels).next().map(|s| s.value)
    }

    /// The sum over every series `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
    }
}

/// Parses and checks `text` (see the module doc); the error names the line.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    let mut current: Option<String> = None;
    let mut series: BTreeSet<String> = BTreeSet::new();
    let mut eof = false;
    for (i, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", i + 1);
        if eof {
            return Err(at("content after # EOF".into()));
        }
        if line == "# EOF" {
            eof = true;
            continue;
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (kw, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let rest = parts.next().unwrap_or("").to_string();
            check_name(name).map_err(at)?;
            if current.as_deref() != Some(name) {
                if out.families.contains_key(name) {
                    return Err(at(format!("family {name} is not contiguous")));
                }
                current = Some(name.to_string());
            }
            let f = out.families.entry(name.to_string()).or_default();
            if !f.samples.is_empty() {
                return Err(at(format!("metadata of {name} after its samples")));
            }
            match kw {
                "TYPE" if f.kind.is_empty() && TYPES.contains(&rest.as_str()) => f.kind = rest,
                "TYPE" => return Err(at("a second or unknown TYPE".into())),
                "HELP" if f.help.is_none() => f.help = Some(rest),
                "UNIT" if f.unit.is_none() && name.ends_with(&format!("_{rest}")) => {
                    f.unit = Some(rest)
                }
                _ => return Err(at(format!("bad metadata {kw}"))),
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            return Err(at("not a sample, metadata or # EOF".into()));
        }
        let s = parse_sample(line).map_err(at)?;
        let family = current
            .as_deref()
            .ok_or_else(|| at("a sample before any # TYPE".into()))?;
        let f = out
            .families
            .get_mut(family)
            .ok_or_else(|| at("no family".into()))?;
        if f.kind.is_empty() || f.help.is_none() {
            return Err(at(format!("{family} has no TYPE or no HELP")));
        }
        check_suffix(family, &f.kind, &s).map_err(at)?;
        if f.kind == "counter" && s.value < 0.0 {
            return Err(at("a negative counter".into()));
        }
        if !series.insert(series_key(&s)) {
            return Err(at("a series twice".into()));
        }
        f.samples.push(s);
    }
    if !eof {
        return Err("no # EOF at the end".into());
    }
    for (name, f) in &out.families {
        if f.kind == "histogram" {
            check_histogram(name, f)?;
        }
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

/// Whether sample `s` may belong to a family `family` of type `kind`.
fn check_suffix(family: &str, kind: &str, s: &Sample) -> Result<(), String> {
    let suffixes: &[&str] = match kind {
        "counter" => &["_total", "_created"],
        "histogram" | "gaugehistogram" => {
            &["_bucket", "_sum", "_count", "_created", "_gcount", "_gsum"]
        }
        "summary" => &["", "_sum", "_count", "_created"],
        "info" => &["_info"],
        _ => &[""],
    };
    let rest = s.name.strip_prefix(family).unwrap_or("!");
    if !suffixes.contains(&rest) {
        return Err(format!("sample {} does not fit {kind} {family}", s.name));
    }
    if rest == "_bucket" && !s.labels.iter().any(|(k, _)| k == "le") {
        return Err("a bucket without le".into());
    }
    Ok(())
}

fn series_key(s: &Sample) -> String {
    let mut labels = s.labels.clone();
    labels.sort();
    format!("{}{labels:?}", s.name)
}

/// `name{a="x",b="y"} value [timestamp]`.
fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| "no value".to_string())?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    let mut fields = rest
        .strip_prefix(' ')
        .ok_or_else(|| "no space before the value".to_string())?
        .split(' ');
    let value = fields.next().unwrap_or("");
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|_| format!("bad value {v:?}"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<f64>()
            .map_err(|_| format!("bad timestamp {ts:?}"))?;
    }
    if fields.next().is_some() {
        return Err("trailing fields".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Labels up to the closing brace; answers them and what follows the brace.
fn parse_labels(mut s: &str) -> Result<(Labels, &str), String> {
    let mut out: Labels = Vec::new();
    loop {
        if let Some(after) = s.strip_prefix('}') {
            return Ok((out, after));
        }
        let eq = s.find('=').ok_or("a label without =")?;
        let key = &s[..eq];
        let ok = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(format!("bad label name {key:?}"));
        }
        if out.iter().any(|(k, _)| k == key) {
            return Err(format!("label {key} twice"));
        }
        s = s[eq + 1..]
            .strip_prefix('"')
            .ok_or("an unquoted label value")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    _ => return Err("a bad escape in a label value".into()),
                },
                Some((_, '\n')) | None => return Err("an unterminated label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        out.push((key.to_string(), value));
        s = &s[end + 1..];
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels not separated by commas".into());
        }
    }
}

/// Per series (labels without `le`): buckets cumulative in `le`, a `+Inf`
/// bucket, equal to `_count`.
fn check_histogram(name: &str, f: &Family) -> Result<(), String> {
    type Key = Labels;
    let mut buckets: BTreeMap<Key, Vec<(f64, f64)>> = BTreeMap::new();
    let mut counts: BTreeMap<Key, f64> = BTreeMap::new();
    let bucket = format!("{name}_bucket");
    let count = format!("{name}_count");
    for s in &f.samples {
        let mut key: Key = s
            .labels
            .iter()
            .filter(|(k, _)| k != "le")
            .cloned()
            .collect();
        key.sort();
        if s.name == bucket {
            let le = s
                .labels
                .iter()
                .find(|(k, _)| k == "le")
                .map(|(_, v)| v.as_str());
            let le = match le {
                Some("+Inf") => f64::INFINITY,
                Some(v) => v.parse().map_err(|_| format!("{name}: bad le {v:?}"))?,
                None => return Err(format!("{name}: a bucket without le")),
            };
            buckets.entry(key).or_default().push((le, s.value));
        } else if s.name == count {
            counts.insert(key, s.value);
        }
    }
    for (key, mut b) in buckets {
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
        if b.windows(2).any(|w| w[1].1 < w[0].1) {
            return Err(format!("{name}{key:?}: buckets are not cumulative"));
        }
        let inf = b.last().filter(|(le, _)| le.is_infinite()).map(|(_, v)| *v);
        match (inf, counts.get(&key)) {
            (Some(i), Some(c)) if i == *c => {}
            _ => return Err(format!("{name}{key:?}: no +Inf bucket equal to _count")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        "# HELP a_seconds Time.\n# TYPE a_seconds histogram\n# UNIT a_seconds seconds\n\
a_seconds_bucket{le=\"0.1\",site=\"x\"} 1\na_seconds_bucket{le=\"+Inf\",site=\"x\"} 3\n\
a_seconds_sum{site=\"x\"} 0.5\na_seconds_count{site=\"x\"} 3\n\
# HELP b Things.\n# TYPE b counter\nb_total{node=\"n \\\"1\\\"\"} 2\n\
# HELP c Level.\n# TYPE c gauge\nc 1.5\n# EOF\n";

    #[test]
    fn a_well_formed_exposition_parses_with_its_values() {
        let e = parse(GOOD).unwrap();
        assert_eq!(e.families["a_seconds"].kind, "histogram");
        assert_eq!(e.value("b_total", &[("node", "n \"1\"")]), Some(2.0));
        assert_eq!(e.value("c", &[]), Some(1.5));
        assert_eq!(e.sum("a_seconds_bucket", &[("site", "x")]), 4.0);
        assert!(e.sample_names().contains("a_seconds_bucket"));
    }

    #[test]
    fn each_fault_is_refused() {
        let rows = [
            ("no EOF", GOOD.replace("# EOF\n", "")),
            ("a sample before TYPE", format!("c 1\n{GOOD}")),
            ("no HELP", GOOD.replace("# HELP c Level.\n", "")),
            ("a counter without _total", GOOD.replace("b_total{", "b{")),
            (
                "a unit that is not the suffix",
                GOOD.replace("UNIT a_seconds seconds", "UNIT a_seconds bytes"),
            ),
            (
                "buckets going down",
                GOOD.replace("{le=\"0.1\",site=\"x\"} 1", "{le=\"0.1\",site=\"x\"} 4"),
            ),
            (
                "+Inf not the count",
                GOOD.replace(
                    "a_seconds_count{site=\"x\"} 3",
                    "a_seconds_count{site=\"x\"} 2",
                ),
            ),
            ("a series twice", GOOD.replace("c 1.5\n", "c 1.5\nc 2\n")),
            (
                "an unquoted label",
                GOOD.replace("{node=\"n \\\"1\\\"\"}", "{node=n}"),
            ),
            ("a bad value", GOOD.replace("c 1.5", "c one")),
            (
                "a split family",
                format!(
                    "{}# HELP b Again.\n# TYPE b counter\nb_total 1\n# EOF\n",
                    GOOD.replace("# EOF\n", "")
                ),
            ),
            (
                "an unknown type",
                GOOD.replace("TYPE c gauge", "TYPE c level"),
            ),
        ];
        for (what, text) in rows {
            assert!(parse(&text).is_err(), "{what} was accepted:\n{text}");
        }
    }
}
