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

/// An inference service (no GPU model) with `extra`'s fields added.
fn inference_with(extra: serde_json::Value) -> Vec<u8> {
    let mut doc = serde_json::json!({"task_id": "svc", "task_type": "inference",
        "resources": {"cpu": {"cores": 1}}, "command": ["sleep", "1"]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        doc[k] = v.clone();
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
            "subnormal gpu memory",
            seed_with("/resources/gpu/memory_gb", Some(json!(5e-324))),
            K::OutOfRange,
            "resources.gpu.memory_gb",
        ),
        (
            "gpu memory below 256 MiB",
            seed_with("/resources/gpu/memory_gb", Some(json!(1e-7))),
            K::OutOfRange,
            "resources.gpu.memory_gb",
        ),
        (
            "gpu memory just below 256 MiB",
            seed_with("/resources/gpu/memory_gb", Some(json!(0.2499))),
            K::OutOfRange,
            "resources.gpu.memory_gb",
        ),
        (
            "share below 1% of a GPU",
            seed_with("/resources/gpu", Some(json!({"share": 1e-7}))),
            K::OutOfRange,
            "resources.gpu.share",
        ),
        (
            "subnormal share",
            seed_with("/resources/gpu", Some(json!({"share": 5e-324}))),
            K::OutOfRange,
            "resources.gpu.share",
        ),
        (
            "subnormal cores",
            seed_with("/resources/cpu/cores", Some(json!(5e-324))),
            K::OutOfRange,
            "resources.cpu.cores",
        ),
        (
            "cores below a tenth",
            seed_with("/resources/cpu/cores", Some(json!(0.05))),
            K::OutOfRange,
            "resources.cpu.cores",
        ),
        (
            "memory below 64 MiB",
            seed_with("/resources/memory/size_gb", Some(json!(1e-7))),
            K::OutOfRange,
            "resources.memory.size_gb",
        ),
        (
            "disk below 64 MiB",
            seed_with("/resources/disk/size_gb", Some(json!(0.01))),
            K::OutOfRange,
            "resources.disk.size_gb",
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
            "an on_node_loss that is neither fence nor replace",
            seed_with("/on_node_loss", Some(json!("sometimes"))),
            K::BadFormat,
            "on_node_loss",
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
        (
            "min_replicas above replicas",
            inference_with(json!({"replicas": 2, "min_replicas": 3})),
            K::Conflict,
            "min_replicas",
        ),
        (
            "min_replicas of u32::MAX",
            inference_with(json!({"replicas": 2, "min_replicas": 4294967295u32})),
            K::Conflict,
            "min_replicas",
        ),
        (
            "zero min_replicas",
            inference_with(json!({"replicas": 2, "min_replicas": 0})),
            K::OutOfRange,
            "min_replicas",
        ),
        (
            "zero max_replicas_per_node",
            inference_with(json!({"replicas": 2, "max_replicas_per_node": 0})),
            K::OutOfRange,
            "max_replicas_per_node",
        ),
        (
            "max_replicas_per_node on training (the seed is a training task)",
            seed_with("/max_replicas_per_node", Some(json!(1))),
            K::Conflict,
            "max_replicas_per_node",
        ),
        (
            "empty command",
            seed_with("/command", Some(json!([]))),
            K::BadFormat,
            "command",
        ),
        (
            "duplicate key",
            br#"{"task_id":"a","task_id":"b","task_type":"training","resources":{"cpu":{"cores":1}}}"#
                .to_vec(),
            K::MalformedJson,
            "task_id",
        ),
        (
            "duplicate nested key",
            br#"{"task_id":"a","task_type":"training","resources":{"cpu":{"cores":1}},"env":{"A":"1","A":"2"}}"#
                .to_vec(),
            K::MalformedJson,
            "env.A",
        ),
        (
            "NUL in checkpoint_dir",
            seed_with("/checkpoint_dir", Some(json!("ckpt\u{0}x"))),
            K::BadFormat,
            "checkpoint_dir",
        ),
        (
            "parent dir in checkpoint_dir",
            seed_with("/checkpoint_dir", Some(json!("ckpt/../../etc"))),
            K::BadFormat,
            "checkpoint_dir",
        ),
        (
            "absolute checkpoint_dir",
            seed_with("/checkpoint_dir", Some(json!("/etc/cron.d"))),
            K::BadFormat,
            "checkpoint_dir",
        ),
        (
            "NUL in gpu model",
            seed_with("/resources/gpu/model", Some(json!("A100\u{0}"))),
            K::BadFormat,
            "resources.gpu.model",
        ),
        (
            "path in gpu model",
            seed_with("/resources/gpu/model", Some(json!("../A100"))),
            K::BadFormat,
            "resources.gpu.model",
        ),
        (
            "absolute path as gpu model",
            seed_with("/resources/gpu/model", Some(json!("/dev/nvidia0"))),
            K::BadFormat,
            "resources.gpu.model",
        ),
        (
            "gpu model that is only a vendor",
            seed_with("/resources/gpu/model", Some(json!("NVIDIA"))),
            K::BadFormat,
            "resources.gpu.model",
        ),
    ];
    // Every row is tried; the failure lists all rows that went wrong.
    let mut wrong = Vec::new();
    for (name, body, kind, field) in cases {
        match parse_task_spec(&body) {
            Ok(_) => wrong.push(format!("{name}: accepted")),
            Err(e) if e.kind != kind || e.field != field || e.message.is_empty() => {
                wrong.push(format!("{name}: {:?} {e}", e.kind))
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn each_minimum_is_accepted_and_named_with_its_field_when_missed() {
    use serde_json::json;
    let at_minimum = [
        ("/resources/gpu/memory_gb", json!(0.25)),
        ("/resources/gpu", json!({"share": 0.01})),
        ("/resources/cpu/cores", json!(0.1)),
        ("/resources/memory/size_gb", json!(0.0625)),
        ("/resources/disk/size_gb", json!(0.0625)),
    ];
    for (pointer, v) in at_minimum {
        let body = seed_with(pointer, Some(v.clone()));
        assert!(
            parse_task_spec(&body).is_ok(),
            "{pointer} = {v} is the minimum"
        );
    }
    let below = [
        (
            "/resources/gpu/memory_gb",
            json!(0.2),
            "must be at least 0.25 GB",
        ),
        (
            "/resources/gpu",
            json!({"share": 0.009}),
            "must be at least 0.01",
        ),
        (
            "/resources/cpu/cores",
            json!(0.09),
            "must be at least 0.1 cores",
        ),
        (
            "/resources/memory/size_gb",
            json!(0.06),
            "must be at least 0.0625 GB",
        ),
        (
            "/resources/disk/size_gb",
            json!(0.06),
            "must be at least 0.0625 GB",
        ),
    ];
    for (pointer, v, says) in below {
        let e = parse_task_spec(&seed_with(pointer, Some(v))).unwrap_err();
        assert!(e.message.contains(says), "{pointer}: {}", e.message);
        assert!(
            e.field.starts_with(&pointer[1..].replace('/', ".")),
            "{pointer}: the error names {}",
            e.field
        );
        assert!(
            !e.message.contains(&e.field),
            "{pointer}: the field is named once, in front of the message: {}",
            e.message
        );
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

#[test]
fn messages_use_words_a_person_uses_not_serde_type_names() {
    use serde_json::json;
    let cases = [
        (
            seed_with("/resources/gpu/count", Some(json!("four"))),
            "expected a whole number from 1 to 64, got the string \"four\"",
        ),
        (
            seed_with("/resources/gpu/count", Some(json!(-1))),
            "expected a whole number from 1 to 64, got -1",
        ),
        (
            seed_with("/command", Some(json!("sleep 1"))),
            "expected a list of strings (the program and its arguments), got the string \"sleep 1\"",
        ),
        (
            seed_with("/resources/cpu/cores", Some(json!("2"))),
            "expected a number, got the string \"2\"",
        ),
        (
            seed_with("/resources/gpu/count", Some(json!(null))),
            "expected a whole number from 1 to 64, got null",
        ),
        (
            seed_with("/resources/gpu/count", Some(json!(1.5))),
            "expected a whole number from 1 to 64, got 1.5",
        ),
        (
            seed_with("/idle_exempt", Some(json!("yes"))),
            "expected true or false, got the string \"yes\"",
        ),
        (
            seed_with("/env", Some(json!(["A=1"]))),
            "expected an object of names to strings, got a list",
        ),
    ];
    for (body, want) in cases {
        let e = parse_task_spec(&body).unwrap_err();
        assert_eq!(e.message, want);
        for serde_word in ["u32", "u16", "f64", "a sequence", "a map"] {
            assert!(!e.message.contains(serde_word), "{}", e.message);
        }
    }
}

#[test]
fn an_empty_command_names_the_way_to_ask_for_a_reservation() {
    let e = parse_task_spec(&seed_with("/command", Some(serde_json::json!([])))).unwrap_err();
    assert_eq!(
        e.message,
        "command must name a program; omit it for a reservation"
    );
}

#[test]
fn a_hello_inventory_with_a_gpu_index_twice_is_refused() {
    use caldera_spec::{GpuInfo, NodeInventory};
    let gpu = |index: u32, uuid: &str| GpuInfo {
        index,
        uuid: uuid.into(),
        model: "NVIDIA A100-SXM4-80GB".into(),
        memory_total_mb: 81920,
        memory_used_mb: 0,
        utilization_pct: 0,
        simulated: false,
    };
    let inv = |gpus: Vec<GpuInfo>| NodeInventory {
        runtimes: Vec::new(),
        hostname: "n1".into(),
        gpus,
        cpu_cores: 8,
        memory_total_mb: 65536,
        disks: Vec::new(),
        disk_offered_mb: 0,
        labels: Default::default(),
        simulated_host: false,
        isolation: "none".into(),
        gpu_source: "nvml".into(),
    };
    assert!(inv(vec![gpu(0, "GPU-a"), gpu(1, "GPU-b")])
        .validate()
        .is_ok());
    let cases = [
        (
            "index twice",
            inv(vec![gpu(0, "GPU-a"), gpu(0, "GPU-b")]),
            "inventory.gpus[1].index",
            "GPU index 0 is listed twice",
        ),
        (
            "uuid twice",
            inv(vec![gpu(0, "GPU-a"), gpu(1, "GPU-a")]),
            "inventory.gpus[1].uuid",
            "GPU uuid \"GPU-a\" is listed twice",
        ),
    ];
    for (name, inventory, field, message) in cases {
        let e = inventory.validate().expect_err(name);
        assert_eq!(e.kind, K::Conflict, "{name}");
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            (field, message),
            "{name}"
        );
    }
}

#[test]
fn a_hello_inventory_beyond_any_machine_is_refused_naming_the_figure() {
    use caldera_spec::node::{
        MAX_GPU_MEMORY_MB, MAX_NODE_CPU_CORES, MAX_NODE_DISK_MB, MAX_NODE_GPUS, MAX_NODE_MEMORY_MB,
    };
    use caldera_spec::{DiskInfo, GpuInfo, NodeInventory};
    let gpu = |index: u32, memory_total_mb: u64| GpuInfo {
        index,
        uuid: format!("GPU-{index}"),
        model: "NVIDIA H200".into(),
        memory_total_mb,
        memory_used_mb: 0,
        utilization_pct: 0,
        simulated: false,
    };
    let base = NodeInventory {
        runtimes: Vec::new(),
        hostname: "n1".into(),
        gpus: vec![gpu(0, 143_771)],
        cpu_cores: 192,
        memory_total_mb: 2 * 1024 * 1024,
        disks: vec![DiskInfo {
            mount: "/".into(),
            total_mb: 30 * 1024 * 1024,
            free_mb: 0,
        }],
        disk_offered_mb: 30 * 1024 * 1024,
        labels: Default::default(),
        simulated_host: false,
        isolation: "none".into(),
        gpu_source: "nvml".into(),
    };
    assert!(base.validate().is_ok(), "a large real machine is welcome");
    let at_bounds = NodeInventory {
        gpus: (0..MAX_NODE_GPUS as u32)
            .map(|i| gpu(i, MAX_GPU_MEMORY_MB))
            .collect(),
        cpu_cores: MAX_NODE_CPU_CORES,
        memory_total_mb: MAX_NODE_MEMORY_MB,
        disk_offered_mb: MAX_NODE_DISK_MB,
        ..base.clone()
    };
    assert!(
        at_bounds.validate().is_ok(),
        "the bounds themselves are allowed"
    );
    let with = |f: &dyn Fn(&mut NodeInventory)| {
        let mut inv = base.clone();
        f(&mut inv);
        inv
    };
    let cases = [
        (
            "u64::MAX GPU memory",
            with(&|i| i.gpus[0].memory_total_mb = u64::MAX),
            "inventory.gpus[0].memory_total_mb",
            "18446744073709551615 MiB",
        ),
        (
            "too many GPUs",
            with(&|i| i.gpus = (0..=MAX_NODE_GPUS as u32).map(|n| gpu(n, 1024)).collect()),
            "inventory.gpus",
            "257 GPUs reported",
        ),
        (
            "too many cores",
            with(&|i| i.cpu_cores = u32::MAX),
            "inventory.cpu_cores",
            "4294967295 CPU cores",
        ),
        (
            "too much memory",
            with(&|i| i.memory_total_mb = MAX_NODE_MEMORY_MB + 1),
            "inventory.memory_total_mb",
            "at most 67108864 MiB",
        ),
        (
            "too much disk offered",
            with(&|i| i.disk_offered_mb = u64::MAX),
            "inventory.disk_offered_mb",
            "at most 1073741824 MiB",
        ),
        (
            "a disk too large",
            with(&|i| i.disks[0].total_mb = u64::MAX),
            "inventory.disks[0].total_mb",
            "disk \"/\"",
        ),
    ];
    for (name, inventory, field, says) in cases {
        let e = inventory.validate().expect_err(name);
        assert_eq!(e.kind, K::OutOfRange, "{name}");
        assert_eq!(e.field, field, "{name}");
        assert!(e.message.contains(says), "{name}: {}", e.message);
    }
}

#[test]
fn on_node_loss_defaults_by_task_type_and_can_be_chosen() {
    use caldera_spec::OnNodeLoss;
    let training = parse_task_spec(SEED.as_bytes()).unwrap();
    assert_eq!(training.node_loss_policy(), OnNodeLoss::Fence);
    let service = parse_task_spec(&inference_with(serde_json::json!({}))).unwrap();
    assert_eq!(service.node_loss_policy(), OnNodeLoss::Replace);
    let chosen = parse_task_spec(&seed_with("/on_node_loss", Some("replace".into()))).unwrap();
    assert_eq!(chosen.node_loss_policy(), OnNodeLoss::Replace);
    let fenced = inference_with(serde_json::json!({"on_node_loss": "fence"}));
    assert_eq!(
        parse_task_spec(&fenced).unwrap().node_loss_policy(),
        OnNodeLoss::Fence
    );
}
