//! The submit form's fields and how they become the task spec: one input
//! per spec field, named by its dotted path (`resources.gpu.count`), set at
//! that path of the spec's value and read by the API's own validator
//! (`caldera_spec::validate::task_spec_from_value`), so an error the
//! validator names (`SpecError::field`) lands at its input.
use serde_json::{Map, Value};

/// How a field's text becomes JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// A number when it reads as one; otherwise the text, which the
    /// validator then refuses naming this field.
    Number,
    /// Words split at whitespace (an argv).
    Words,
    /// One of the given options; the first is what the form shows before
    /// anything is chosen, so it must be the value the API gives a request
    /// that leaves the field out (where the API has a default).
    Choice(&'static [&'static str]),
}

/// One input of the form.
pub struct Field {
    /// The spec's dotted path: the input's `name`, its id after `field-`.
    pub path: &'static str,
    pub label: &'static str,
    pub kind: Kind,
    pub hint: &'static str,
}

/// The seed's fields, in the form's order.
pub const FIELDS: &[Field] = &[
    Field {
        path: "task_id",
        label: "Task id",
        kind: Kind::Text,
        hint: "train_20240716_001",
    },
    Field {
        path: "task_type",
        label: "Type",
        kind: Kind::Choice(&["training", "inference"]),
        hint: "",
    },
    Field {
        path: "priority",
        label: "Priority",
        // `medium` first: the API's default (`Priority::default`), so a
        // form sent untouched never outranks (and preempts) running work.
        kind: Kind::Choice(&["medium", "low", "high"]),
        hint: "",
    },
    Field {
        path: "resources.gpu.count",
        label: "GPU count",
        kind: Kind::Number,
        hint: "4",
    },
    Field {
        path: "resources.gpu.memory_gb",
        label: "Memory per GPU (GB)",
        kind: Kind::Number,
        hint: "80",
    },
    Field {
        path: "resources.gpu.share",
        label: "GPU share (0..1]",
        kind: Kind::Number,
        hint: "0.5",
    },
    Field {
        path: "resources.gpu.model",
        label: "GPU model",
        kind: Kind::Text,
        hint: "A100",
    },
    Field {
        path: "resources.cpu.cores",
        label: "CPU cores",
        kind: Kind::Number,
        hint: "32",
    },
    Field {
        path: "resources.memory.size_gb",
        label: "Memory (GB)",
        kind: Kind::Number,
        hint: "256",
    },
    Field {
        path: "resources.disk.size_gb",
        label: "Disk (GB)",
        kind: Kind::Number,
        hint: "200",
    },
    Field {
        path: "duration",
        label: "Duration (HH:MM:SS)",
        kind: Kind::Text,
        hint: "01:00:00",
    },
    Field {
        path: "image",
        label: "Image",
        kind: Kind::Text,
        hint: "registry.internal/deeplearning/pytorch:2.1-cu12.1",
    },
    // Free text, not a choice: a choice always sends one of its options,
    // and the API's default depends on whether an image is named.
    Field {
        path: "runtime",
        label: "Runtime (container or process; blank: container when an image is named)",
        kind: Kind::Text,
        hint: "container",
    },
    Field {
        path: "prepare_timeout",
        label: "Prepare timeout (HH:MM:SS; blank: the server's)",
        kind: Kind::Text,
        hint: "00:10:00",
    },
    Field {
        path: "command",
        label: "Command",
        kind: Kind::Words,
        hint: "python train.py --epochs 3",
    },
    Field {
        path: "replicas",
        label: "Replicas (inference)",
        kind: Kind::Number,
        hint: "2",
    },
    Field {
        path: "model",
        label: "Model version",
        kind: Kind::Text,
        hint: "llama-7b:v3",
    },
];

/// The field whose path is `path`, if the form has one.
pub fn field(path: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.path == path)
}

/// A field's text as JSON, by its kind.
fn json_of(kind: Kind, text: &str) -> Value {
    match kind {
        Kind::Text | Kind::Choice(_) => Value::String(text.to_string()),
        Kind::Words => Value::Array(
            text.split_whitespace()
                .map(|w| Value::String(w.to_string()))
                .collect(),
        ),
        Kind::Number => {
            if let Ok(n) = text.parse::<i64>() {
                Value::from(n)
            } else if let Some(n) = text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Value::Number(n)
            } else {
                Value::String(text.to_string())
            }
        }
    }
}

/// Sets `value` at the dotted `path` of `root`, making objects on the way.
fn set(root: &mut Map<String, Value>, path: &str, value: Value) {
    let mut parts = path.split('.').peekable();
    let mut at = root;
    while let Some(p) = parts.next() {
        if parts.peek().is_none() {
            at.insert(p.to_string(), value);
            return;
        }
        let next = at
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        match next.as_object_mut() {
            Some(m) => at = m,
            None => return,
        }
    }
}

/// The spec's JSON from the filled-in fields (`value(path)`: the text of
/// that input, blank ones left out, as the API leaves out absent fields).
pub fn spec_json(value: impl Fn(&str) -> Option<String>) -> Value {
    let mut root = Map::new();
    for f in FIELDS {
        if let Some(text) = value(f.path) {
            let text = text.trim();
            if !text.is_empty() {
                set(&mut root, f.path, json_of(f.kind, text));
            }
        }
    }
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_seeds_request_typed_into_the_form_is_the_seeds_json() {
        let typed: HashMap<&str, &str> = [
            ("task_id", "train_20240716_001"),
            ("task_type", "training"),
            ("priority", "high"),
            ("resources.gpu.count", "4"),
            ("resources.gpu.memory_gb", "80"),
            ("resources.gpu.model", "A100"),
            ("resources.cpu.cores", "32"),
            ("resources.memory.size_gb", "256"),
            ("resources.disk.size_gb", "200"),
            ("duration", "01:00:00"),
            ("image", "registry.internal/deeplearning/pytorch:2.1-cu12.1"),
            ("command", " sleep  60 "),
            ("replicas", ""),
        ]
        .into();
        let v = spec_json(|p| typed.get(p).map(|s| s.to_string()));
        assert_eq!(
            v,
            serde_json::json!({"task_id":"train_20240716_001","task_type":"training","priority":"high",
                "resources":{"gpu":{"count":4,"memory_gb":80,"model":"A100"},"cpu":{"cores":32},
                "memory":{"size_gb":256},"disk":{"size_gb":200}},"duration":"01:00:00",
                "image":"registry.internal/deeplearning/pytorch:2.1-cu12.1","command":["sleep","60"]})
        );
        let typed = caldera_spec::validate::task_spec_from_value(v.clone()).unwrap();
        assert_eq!(
            typed,
            caldera_spec::parse_task_spec(v.to_string().as_bytes()).unwrap(),
            "the form's spec is the one the API reads from the same JSON"
        );
    }

    #[test]
    fn the_priority_shown_before_a_choice_is_the_apis_default() {
        let Some(Field {
            kind: Kind::Choice(options),
            ..
        }) = field("priority")
        else {
            panic!("the form has a priority choice");
        };
        assert_eq!(
            options.first().copied(),
            Some(caldera_spec::Priority::default().label().as_str())
        );
        // A form left untouched sends its first option: the API's default.
        let v = spec_json(|p| match p {
            "task_id" => Some("t".into()),
            "task_type" => Some("training".into()),
            "priority" => options.first().map(|o| o.to_string()),
            "resources.cpu.cores" => Some("1".into()),
            _ => None,
        });
        let parsed = caldera_spec::validate::task_spec_from_value(v).unwrap();
        let api = caldera_spec::parse_task_spec(
            br#"{"task_id":"t","task_type":"training","resources":{"cpu":{"cores":1}}}"#,
        )
        .unwrap();
        assert_eq!(parsed.priority, api.priority);
    }

    #[test]
    fn a_number_field_that_is_not_one_is_refused_naming_that_field() {
        let v = spec_json(|p| match p {
            "task_id" => Some("t".into()),
            "task_type" => Some("training".into()),
            "resources.gpu.count" => Some("four".into()),
            _ => None,
        });
        let e = caldera_spec::validate::task_spec_from_value(v.clone()).unwrap_err();
        assert_eq!(e.field, "resources.gpu.count");
        assert!(field(&e.field).is_some());
        // The same field, kind and sentence as the API answers the same body.
        let api = caldera_spec::parse_task_spec(v.to_string().as_bytes()).unwrap_err();
        assert_eq!((e.kind, &e.message), (api.kind, &api.message));
    }
}
