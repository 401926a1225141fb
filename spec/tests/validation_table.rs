//! Table tests: every bad input is rejected with its stable code and field path.
use caldera_spec::{parse_task_spec, SpecErrorKind as K, TaskType};

const SEED: &str = r#"{"task_id":"train_20240716_001","task_type":"training","priority":"high",
 "resources":{"gpu":{"count":4,"memory_gb":80,"model":"A100"},"cpu":{"cores":32},
 "memory":{"size_gb":256},"disk":{"size_gb":200}},"duration":"01:00:00",
 "image":"registry.internal/deeplearning/pytorch:2.1-cu12.1"}"#;

/// The seed with `path` (a JSON pointer) replaced by `value` (`None` removes it).
fn seed_with(pointer: &str, value: Option<serde_json::Value>) -> Vec<u8> {
    let mut doc: serde_json::Value = serde_json::from_str(SEED).unwrap();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = doc.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    match value {
        Some(v) => {
            target.insert(key.to_string(), v);
        }
        None => {
            target.remove(key);
        }
    }
    serde_json::to_vec(&doc).unwrap()
}

#[test]
fn the_seed_example_is_accepted_as_written() {
    let spec = parse_task_spec(SEED.as_bytes()).unwrap();
    assert_eq!(spec.task_id, "train_20240716_001");
    assert_eq!(spec.task_type, TaskType::Training);
    assert_eq!(spec.priority.label(), "high");
    assert_eq!(spec.resources.gpu_count(), 4);
    assert_eq!(spec.resources.cpu_milli(), 32_000);
    assert_eq!(spec.resources.memory_mib(), 256 * 1024);
    assert_eq!(spec.duration_secs(), Some(3600));
}

#[test]
fn bad_inputs_are_rejected_with_code_and_field() {
    use serde_json::json;
    let cases: Vec<(&str, Vec<u8>, K, &str)> = vec![
        (
            "malformed",
            b"{\"task_id\": ".to_vec(),
            K::MalformedJson,
            ".",
        ),
        ("not an object", b"[1,2]".to_vec(), K::WrongType, "."),
        (
            "unknown top-level field",
            seed_with("/gpus", Some(json!(1))),
            K::UnknownField,
            "gpus",
        ),
        (
            "unknown nested field",
            seed_with("/resources/gpu/mem", Some(json!(1))),
            K::UnknownField,
            "resources.gpu.mem",
        ),
        (
            "missing task_id",
            seed_with("/task_id", None),
            K::MissingField,
            "task_id",
        ),
        (
            "missing task_type",
            seed_with("/task_type", None),
            K::MissingField,
            "task_type",
        ),
        (
            "missing resources",
            seed_with("/resources", None),
            K::MissingField,
            "resources",
        ),
        (
            "missing cpu cores",
            seed_with("/resources/cpu/cores", None),
            K::MissingField,
            "resources.cpu.cores",
        ),
        (
            "count is a string",
            seed_with("/resources/gpu/count", Some(json!("4"))),
            K::WrongType,
            "resources.gpu.count",
        ),
        (
            "negative count",
            seed_with("/resources/gpu/count", Some(json!(-1))),
            K::WrongType,
            "resources.gpu.count",
        ),
        (
            "zero count",
            seed_with("/resources/gpu/count", Some(json!(0))),
            K::OutOfRange,
            "resources.gpu.count",
        ),
        (
            "absurd count",
            seed_with("/resources/gpu/count", Some(json!(100000))),
            K::OutOfRange,
            "resources.gpu.count",
        ),
        (
            "zero gpu memory",
            seed_with("/resources/gpu/memory_gb", Some(json!(0))),
            K::OutOfRange,
            "resources.gpu.memory_gb",
        ),
        (
            "negative gpu memory",
            seed_with("/resources/gpu/memory_gb", Some(json!(-80))),
            K::OutOfRange,
            "resources.gpu.memory_gb",
        ),
        (
            "absurd gpu memory",
            seed_with("/resources/gpu/memory_gb", Some(json!(1e9))),
            K::OutOfRange,
            "resources.gpu.memory_gb",
        ),
        (
            "share with count 4",
            seed_with("/resources/gpu/share", Some(json!(0.5))),
            K::Conflict,
            "resources.gpu.share",
        ),
        (
            "zero cores",
            seed_with("/resources/cpu/cores", Some(json!(0))),
            K::OutOfRange,
            "resources.cpu.cores",
        ),
        (
            "negative cores",
            seed_with("/resources/cpu/cores", Some(json!(-2))),
            K::OutOfRange,
            "resources.cpu.cores",
        ),
        (
            "absurd memory",
            seed_with("/resources/memory/size_gb", Some(json!(1e12))),
            K::OutOfRange,
            "resources.memory.size_gb",
        ),
        (
            "zero disk",
            seed_with("/resources/disk/size_gb", Some(json!(0))),
            K::OutOfRange,
            "resources.disk.size_gb",
        ),
        (
            "bad duration",
            seed_with("/duration", Some(json!("1h"))),
            K::BadFormat,
            "duration",
        ),
        (
            "duration minutes 60",
            seed_with("/duration", Some(json!("01:60:00"))),
            K::BadFormat,
            "duration",
        ),
        (
            "zero duration",
            seed_with("/duration", Some(json!("00:00:00"))),
            K::BadFormat,
            "duration",
        ),
        (
            "duration a number",
            seed_with("/duration", Some(json!(3600))),
            K::WrongType,
            "duration",
        ),
        (
            "bad priority word",
            seed_with("/priority", Some(json!("urgent"))),
            K::OutOfRange,
            "priority",
        ),
        (
            "priority too big",
            seed_with("/priority", Some(json!(5000))),
            K::OutOfRange,
            "priority",
        ),
        (
            "bad task type",
            seed_with("/task_type", Some(json!("batch"))),
            K::BadFormat,
            "task_type",
        ),
        (
            "empty task id",
            seed_with("/task_id", Some(json!(""))),
            K::BadFormat,
            "task_id",
        ),
        (
            "task id with slash",
            seed_with("/task_id", Some(json!("a/b"))),
            K::BadFormat,
            "task_id",
        ),
        (
            "empty command",
            seed_with("/command", Some(json!([""]))),
            K::BadFormat,
            "command[0]",
        ),
        (
            "reserved env",
            seed_with("/env", Some(json!({"CALDERA_TASK_ID":"x"}))),
            K::Conflict,
            "env.CALDERA_TASK_ID",
        ),
        (
            "bad env name",
            seed_with("/env", Some(json!({"1X":"x"}))),
            K::BadFormat,
            "env.1X",
        ),
        (
            "training replicas",
            seed_with("/replicas", Some(json!(3))),
            K::Conflict,
            "replicas",
        ),
        (
            "zero replicas",
            seed_with("/replicas", Some(json!(0))),
            K::OutOfRange,
            "replicas",
        ),
        (
            "empty resources",
            seed_with("/resources", Some(json!({}))),
            K::MissingField,
            "resources",
        ),
        (
            "empty model",
            seed_with("/resources/gpu/model", Some(json!(""))),
            K::BadFormat,
            "resources.gpu.model",
        ),
    ];
    for (name, body, kind, field) in cases {
        match parse_task_spec(&body) {
            Ok(_) => panic!("{name}: accepted"),
            Err(e) => {
                assert_eq!(e.kind, kind, "{name}: {e}");
                assert_eq!(e.field, field, "{name}: {e}");
                assert!(!e.message.is_empty(), "{name}");
            }
        }
    }
}

#[test]
fn share_alone_and_numbers_for_priority_are_accepted() {
    let body = br#"{"task_id":"svc-1","task_type":"inference","priority":750,
      "resources":{"gpu":{"share":0.25}},"command":["sleep","1"],"replicas":2}"#;
    let spec = parse_task_spec(body).unwrap();
    assert_eq!(spec.priority.0, 750);
    assert_eq!(spec.resources.gpu_count(), 1);
    assert_eq!(spec.replicas, Some(2));
}

#[test]
fn oversized_bodies_are_refused_before_parsing() {
    let body = vec![b' '; caldera_spec::MAX_BODY_BYTES + 1];
    let e = parse_task_spec(&body).unwrap_err();
    assert_eq!(e.kind, K::TooLarge);
    assert_eq!(e.kind.code(), 41301);
}

#[test]
fn every_error_kind_has_a_distinct_code() {
    let kinds = [
        K::MalformedJson,
        K::UnknownField,
        K::WrongType,
        K::MissingField,
        K::OutOfRange,
        K::BadFormat,
        K::Conflict,
        K::TooLarge,
    ];
    let mut codes: Vec<u32> = kinds.iter().map(|k| k.code()).collect();
    codes.sort();
    codes.dedup();
    assert_eq!(codes.len(), kinds.len());
}
