//! Reading a JSON document into a typed value: duplicate keys refused as
//! malformed JSON, and serde's errors turned into sentences that name the
//! field and say what it must be in words a person uses ("a whole number from
//! 1 to 64", not "u32").
use crate::error::{SpecError, SpecErrorKind as K};
use crate::limits::{MAX_GPUS, MAX_REPLICAS, MAX_RETRIES};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// Deserializes any JSON document, turning serde's error into a [`SpecError`]
/// that names the field path. A key given twice in one object is malformed
/// JSON (which value was meant is a guess), wherever it is.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, SpecError> {
    read::<UniqueKeys>(body)?;
    read(body)
}

/// Reads a JSON value already in memory (a form's fields set at their
/// dotted paths) into a typed value, with the same field-naming errors as
/// [`parse_json`]; a value holds no key twice, so there is nothing to refuse
/// for that.
pub fn from_json_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, SpecError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        classify(path, &inner)
    })
}

fn read<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, SpecError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        classify(path, &inner)
    })
}

/// A document walked only to find a key given twice in one object.
struct UniqueKeys;

/// The start of the error [`UniqueKeys`] raises; `classify` recognises it.
const DUPLICATE_KEY: &str = "duplicate key";

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeys)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE_KEY} `{key}`")));
            }
            map.next_value::<UniqueKeys>()?;
            seen.insert(key);
        }
        Ok(UniqueKeys)
    }
}

fn classify(path: String, err: &serde_json::Error) -> SpecError {
    use serde_json::error::Category;
    let text = err.to_string();
    // serde_json appends " at line L column C"; keep the sentence only.
    let msg = text.split(" at line ").next().unwrap_or(&text).to_string();
    match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => SpecError::new(
            K::MalformedJson,
            ".",
            format!("the body is not valid JSON ({text})"),
        ),
        Category::Data => {
            let named = between_backticks(&msg);
            if let Some(key) = named.filter(|_| msg.starts_with(DUPLICATE_KEY)) {
                let field = join(&path, key);
                let message =
                    format!("the key {key:?} appears twice in one object; give each key once");
                SpecError::new(K::MalformedJson, field, message)
            } else if let Some(name) = named.filter(|_| msg.starts_with("missing field")) {
                SpecError::new(
                    K::MissingField,
                    join(&path, name),
                    format!("{name} is required"),
                )
            } else if msg.starts_with("unknown field") {
                let name = named.unwrap_or("?");
                let field = if path.ends_with(name) {
                    path.clone()
                } else {
                    join(&path, name)
                };
                SpecError::new(K::UnknownField, field, msg)
            } else if msg.starts_with("unknown variant") {
                SpecError::new(K::BadFormat, path, msg)
            } else if let Some(words) = wrong_type_in_words(&path, &msg) {
                SpecError::new(K::WrongType, path, words)
            } else {
                SpecError::new(K::OutOfRange, path, msg)
            }
        }
    }
}

/// serde's "invalid type: string \"four\", expected u32" as "expected a whole
/// number from 1 to 64, got the string \"four\"" (the field is named beside it).
fn wrong_type_in_words(path: &str, msg: &str) -> Option<String> {
    let rest = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))?;
    let (got, expected) = rest.rsplit_once(", expected ")?;
    let expected = field_in_words(path).unwrap_or_else(|| type_in_words(expected));
    Some(format!("expected {expected}, got {}", value_in_words(got)))
}

/// What the fields whose range matters must be, as the documentation says it.
fn field_in_words(path: &str) -> Option<String> {
    Some(match path {
        "resources.gpu.count" => format!("a whole number from 1 to {MAX_GPUS}"),
        "replicas" => format!("a whole number from 1 to {MAX_REPLICAS}"),
        "min_replicas" => "a whole number from 1 to replicas".into(),
        "max_retries" => format!("a whole number from 0 to {MAX_RETRIES}"),
        "command" => "a list of strings (the program and its arguments)".into(),
        "env" | "labels" => "an object of names to strings".into(),
        _ => return None,
    })
}

/// serde's name of an expected type in words ("u32" → "a whole number").
fn type_in_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" => {
            "a whole number".into()
        }
        "f32" | "f64" => "a number".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        "a boolean" => "true or false".into(),
        e if e.starts_with("struct ") => "an object".into(),
        e => e.replace('`', ""),
    }
}

/// serde's description of the value it got ("string \"x\"", "integer `-1`").
fn value_in_words(got: &str) -> String {
    if let Some(s) = got.strip_prefix("string ") {
        return format!("the string {s}");
    }
    match got {
        "sequence" => "a list".into(),
        "map" => "an object".into(),
        g => g
            .rsplit_once(' ')
            .map_or(g, |(_, v)| v)
            .trim_matches('`')
            .to_string(),
    }
}

fn between_backticks(s: &str) -> Option<&str> {
    let start = s.find('`')? + 1;
    let len = s[start..].find('`')?;
    Some(&s[start..start + len])
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() || path == "." {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}
