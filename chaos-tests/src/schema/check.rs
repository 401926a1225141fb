//! Whether a JSON value is an instance of a schema, for the subset of JSON
//! Schema 2020-12 that utoipa emits: `$ref`, `type` (one or a list),
//! `enum`, `properties`/`required`/`additionalProperties`, `items`,
//! `allOf`/`oneOf`/`anyOf` (oneOf is read as anyOf: a value that fits two
//! branches is still a value the server may send), `minimum`/`maximum`.
use super::{resolve, types};
use serde_json::Value;

/// `Err` names the first place (a JSON pointer) where `v` does not fit.
pub fn conforms(doc: &Value, schema: &Value, v: &Value) -> Result<(), String> {
    at(doc, schema, v, "")
}

fn at(doc: &Value, schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    let s = resolve(doc, schema);
    if let Some(all) = s["allOf"].as_array() {
        for part in all {
            at(doc, part, v, path)?;
        }
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = s[key].as_array() {
            let fits = branches.iter().any(|b| at(doc, b, v, path).is_ok());
            if !fits {
                return Err(format!("{path}: {v} fits none of the {key} branches"));
            }
        }
    }
    if let Some(options) = s["enum"].as_array() {
        if !options.contains(v) {
            return Err(format!("{path}: {v} is not one of {options:?}"));
        }
    }
    let allowed = types(s);
    if !allowed.is_empty() && !allowed.iter().any(|t| is_type(v, t)) {
        return Err(format!("{path}: {v} is not {allowed:?}"));
    }
    if let Some(n) = v.as_f64() {
        if s["minimum"].as_f64().is_some_and(|min| n < min) {
            return Err(format!("{path}: {n} < minimum {}", s["minimum"]));
        }
        if s["maximum"].as_f64().is_some_and(|max| n > max) {
            return Err(format!("{path}: {n} > maximum {}", s["maximum"]));
        }
    }
    match v {
        Value::Object(m) => {
            for r in s["required"].as_array().into_iter().flatten() {
                let r = r.as_str().unwrap_or_default();
                if !m.contains_key(r) {
                    return Err(format!("{path}: required {r:?} is absent"));
                }
            }
            let props = s["properties"].as_object();
            for (k, field) in m {
                let here = format!("{path}/{k}");
                match props.and_then(|p| p.get(k)) {
                    Some(ps) => at(doc, ps, field, &here)?,
                    None => match &s["additionalProperties"] {
                        Value::Bool(false) if props.is_some() => {
                            return Err(format!("{here}: not a property of the schema"))
                        }
                        extra @ Value::Object(_) => at(doc, extra, field, &here)?,
                        _ => {}
                    },
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            if s.get("items").is_some() {
                for (i, item) in items.iter().enumerate() {
                    at(doc, &s["items"], item, &format!("{path}/{i}"))?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_fits_or_is_told_where_it_does_not() {
        let doc = json!({"components": {"schemas": {"P": {"type": "object",
            "required": ["n"], "additionalProperties": false,
            "properties": {"n": {"type": "integer", "minimum": 0}, "s": {"type": ["string", "null"]}}}}}});
        let p = json!({"$ref": "#/components/schemas/P"});
        assert!(conforms(&doc, &p, &json!({"n": 1, "s": null})).is_ok());
        assert!(conforms(&doc, &p, &json!({"n": -1}))
            .unwrap_err()
            .contains("/n"));
        assert!(conforms(&doc, &p, &json!({}))
            .unwrap_err()
            .contains("required"));
        assert!(conforms(&doc, &p, &json!({"n": 1, "x": 2}))
            .unwrap_err()
            .contains("/x"));
        assert!(conforms(&doc, &p, &json!({"n": 1, "s": 3})).is_err());
    }
}
