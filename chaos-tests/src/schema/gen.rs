//! Values from a schema: valid ones (with the server's own notion of a
//! plausible task id, duration or hash for the fields that have one, so
//! valid bodies reach the handlers' happy paths), and broken ones: the wrong
//! type, a required field missing, an unknown field, numbers past any
//! range, odd strings, bodies that are not JSON at all.
use super::{resolve, types, Rng};
use serde_json::{json, Map, Value};

/// Strings a parser or a path router may trip on.
pub const ODD_STRINGS: &[&str] = &[
    "",
    " ",
    "..",
    "../../etc/passwd",
    "%00",
    "\u{0}",
    "null",
    "0",
    "-1",
    "1e309",
    "ü-🦀-\u{202e}",
    "a/b",
    "{id}",
    "\"quoted\"",
    "<script>x</script>",
    "x.r0",
    "alpha/t1",
    "\\",
];

/// A valid instance of `schema`; `name` is the property it is for.
pub fn valid(doc: &Value, schema: &Value, rng: &mut Rng, name: &str, depth: usize) -> Value {
    let s = resolve(doc, schema);
    if let Some(v) = plausible(name, rng) {
        return v;
    }
    if let Some(all) = s["allOf"].as_array() {
        let mut merged = Map::new();
        for part in all {
            if let Value::Object(m) = valid(doc, part, rng, name, depth + 1) {
                merged.extend(m);
            }
        }
        return Value::Object(merged);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = s[key].as_array().filter(|b| !b.is_empty()) {
            // Not null where there is something else to send.
            let real: Vec<&Value> = branches.iter().filter(|b| b["type"] != "null").collect();
            let pick = if real.is_empty() {
                &branches[0]
            } else {
                *rng.pick(&real)
            };
            return valid(doc, pick, rng, name, depth + 1);
        }
    }
    if let Some(options) = s["enum"].as_array().filter(|o| !o.is_empty()) {
        return rng.pick(options).clone();
    }
    let ts = types(s);
    let t = ts
        .iter()
        .find(|t| **t != "null")
        .copied()
        .unwrap_or("object");
    match t {
        "boolean" => Value::Bool(rng.one_in(2)),
        "integer" => {
            let min = s["minimum"].as_i64().unwrap_or(0);
            let max = s["maximum"].as_i64().unwrap_or(min + 8).min(min + 1000);
            json!(min + rng.below((max - min + 1) as usize) as i64)
        }
        "number" => json!(0.5 + rng.below(8) as f64),
        "string" => Value::String(word(rng)),
        "array" if depth < 6 => {
            let n = rng.below(3);
            Value::Array(
                (0..n)
                    .map(|_| valid(doc, &s["items"], rng, name, depth + 1))
                    .collect(),
            )
        }
        "array" => json!([]),
        _ => object(doc, s, rng, depth),
    }
}

fn object(doc: &Value, s: &Value, rng: &mut Rng, depth: usize) -> Value {
    let required: Vec<&str> = s["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Map::new();
    for (k, ps) in s["properties"].as_object().into_iter().flatten() {
        if required.contains(&k.as_str()) || (depth < 4 && rng.one_in(2)) {
            out.insert(k.clone(), valid(doc, ps, rng, k, depth + 1));
        }
    }
    if let Value::Object(_) = &s["additionalProperties"] {
        if depth < 4 && rng.one_in(2) {
            let v = valid(doc, &s["additionalProperties"], rng, "", depth + 1);
            out.insert(word(rng), v);
        }
    }
    Value::Object(out)
}

/// Values the server accepts for the fields whose rules are not in the
/// schema (formats, lengths, what a node can hold).
fn plausible(name: &str, rng: &mut Rng) -> Option<Value> {
    Some(match name {
        "task_id" | "name" | "version" => Value::String(format!("f{}", rng.below(6))),
        "duration" => json!("00:10:00"),
        "sha256" => Value::String(format!("{:064x}", rng.next_u64())),
        "uri" => json!("file:///tmp/caldera-fuzz-weights"),
        "size_bytes" => json!(1 + rng.below(4096)),
        "cores" => json!(0.5 + rng.below(2) as f64),
        "size_gb" | "memory_gb" => json!(1 + rng.below(4)),
        "share" => json!(0.5),
        "count" | "replicas" | "min_replicas" => json!(1 + rng.below(2)),
        // The workload must be harmless whatever else the body says.
        "command" => json!(["true"]),
        "checkpoint_dir" => json!("ckpt"),
        "model" => Value::String(format!("f{}:f{}", rng.below(6), rng.below(6))),
        _ => return None,
    })
}

/// A short name.
pub fn word(rng: &mut Rng) -> String {
    const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_";
    let n = 1 + rng.below(8);
    (0..n).map(|_| *rng.pick(ALPHA) as char).collect()
}

/// A body that is not what `schema` says, and what is wrong with it.
pub fn broken(doc: &Value, schema: &Value, rng: &mut Rng) -> (String, &'static str) {
    let mut v = valid(doc, schema, rng, "", 0);
    let what = match rng.below(9) {
        0 => {
            return (
                rng.pick(&["[]", "\"x\"", "42", "null", "true"]).to_string(),
                "a body of the wrong type",
            )
        }
        1 => {
            return (
                rng.pick(&["", "{", "{\"a\":", "not json", "{}}", "\u{feff}{}"])
                    .to_string(),
                "not JSON",
            )
        }
        2 => return ("[".repeat(20_000) + &"]".repeat(20_000), "deep nesting"),
        3 => {
            if let Some(m) = v.as_object_mut().filter(|m| !m.is_empty()) {
                let keys: Vec<String> = m.keys().cloned().collect();
                m.remove(&keys[rng.below(keys.len())]);
            }
            "a field missing"
        }
        4 => {
            if let Some(m) = v.as_object_mut() {
                m.insert("zz_unknown".into(), json!(1));
            }
            "an unknown field"
        }
        5 => {
            let huge = rng
                .pick(&[
                    "1e308",
                    "18446744073709551616",
                    "-1",
                    "1.5",
                    "-9223372036854775809",
                    "1e-320",
                ])
                .to_string();
            let text = replace_leaf(&mut v, rng, Value::String(PLACEHOLDER.into()));
            return (
                text.replace(&format!("\"{PLACEHOLDER}\""), &huge),
                "a number past every range",
            );
        }
        6 => {
            let odd = Value::String(rng.pick(ODD_STRINGS).to_string());
            replace_leaf(&mut v, rng, odd);
            "an odd string"
        }
        7 => {
            let wrong = rng
                .pick(&[
                    json!([]),
                    json!({}),
                    json!("s"),
                    json!(-7),
                    json!(null),
                    json!(true),
                ])
                .clone();
            replace_leaf(&mut v, rng, wrong);
            "a field of the wrong type"
        }
        _ => return ("x".repeat(2 << 20), "a body larger than any limit"),
    };
    (v.to_string(), what)
}

const PLACEHOLDER: &str = "__huge__";

/// Replaces one value somewhere in `v` (not the root) with `with`; the
/// result as text.
fn replace_leaf(v: &mut Value, rng: &mut Rng, with: Value) -> String {
    let mut pointers = Vec::new();
    collect(v, String::new(), &mut pointers);
    if let Some(p) = (!pointers.is_empty()).then(|| pointers[rng.below(pointers.len())].clone()) {
        if let Some(slot) = v.pointer_mut(&p) {
            *slot = with;
        }
    }
    v.to_string()
}

fn collect(v: &Value, here: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            let p = format!("{here}/{}", k.replace('~', "~0").replace('/', "~1"));
            out.push(p.clone());
            collect(x, p, out);
        }),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            let p = format!("{here}/{i}");
            out.push(p.clone());
            collect(x, p, out);
        }),
        _ => {}
    }
}
