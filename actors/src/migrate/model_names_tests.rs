use super::*;
use caldera_spec::{
    BillingRecord, ModelMark, ModelState, ModelVersionSpec, RetireOrder, SwapPhase, WeightsSpec,
};
use caldera_storage::{EventFilter, StoreConfig};

fn version(name: &str, v: &str, owner: Option<&str>) -> ModelVersionRecord {
    ModelVersionRecord {
        spec: ModelVersionSpec {
            name: name.into(),
            version: v.into(),
            weights: WeightsSpec {
                uri: "file:///m.bin".into(),
                size_bytes: 1,
                sha256: "ab".repeat(32),
            },
            image: None,
        },
        state: ModelState::Active,
        pinned: true,
        registered_at_ms: 0,
        owner: owner.map(str::to_string),
        nodes: Default::default(),
        tasks: Default::default(),
        retire: None,
        checkpoint: None,
    }
}

fn task(tenant: &str, id: &str, model: &str) -> TaskRecord {
    let body = format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"cpu":{{"cores":1}}}},"command":["serve"]}}"#
    );
    let mut spec = caldera_spec::parse_task_spec(body.as_bytes()).unwrap();
    spec.task_id = caldera_spec::task_key(tenant, id);
    spec.model = Some(model.into());
    TaskRecord::new(spec, tenant.into(), 0, 1)
}

fn swap(from: &str, to: &str) -> SwapProgress {
    SwapProgress {
        from: ModelRef::parse(from, "from").unwrap(),
        to: ModelRef::parse(to, "to").unwrap(),
        requested_by: "acme".into(),
        allow_downtime: false,
        max_surge: 0,
        phase: SwapPhase::Swapping,
        replicas: vec![],
        reason: None,
        started_ms: 0,
        finished_ms: None,
    }
}

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path(), &StoreConfig::default()).unwrap()
}

/// The store as the code before namespaces left it: acme's `llama:v9` and
/// `llama:v10` under bare names (v10 retiring in favour of v9), a service of
/// acme's swapping v10 -> v9 with a held allocation billed to v10 then v9,
/// the operator's `base:v1`, acme's own `@acme.llama:v1`, and zeta's task on
/// the operator's version.
fn legacy_store(store: &Store) {
    let mut b = store.batch();
    b.put_model_version(&version("llama", "v9", Some("acme")));
    let mut v10 = version("llama", "v10", Some("acme"));
    v10.retire = Some(RetireOrder {
        by: "tenant acme".into(),
        at_ms: 0,
        replace_with: Some("llama:v9".into()),
        swaps_asked: Default::default(),
    });
    b.put_model_version(&v10);
    b.put_model_version(&version("base", "v1", None));
    b.put_model_version(&version("@acme.llama", "v1", Some("acme")));
    let mut svc = task("acme", "svc", "llama:v10");
    svc.serving_model = Some("llama:v10".into());
    svc.swap = Some(swap("llama:v10", "llama:v9"));
    b.put_task(&svc);
    b.put_task(&task("zeta", "job", "base:v1"));
    b.put_open_billing(&BillingRecord {
        allocation_id: "svc.1".into(),
        tenant: "acme".into(),
        task_id: "acme/svc".into(),
        model: Some("llama:v10".into()),
        model_marks: vec![ModelMark {
            at_ms: 5,
            model: "llama:v9".into(),
        }],
        ..Default::default()
    });
    store.commit(b).unwrap();
}

#[test]
fn a_tenants_bare_versions_move_into_its_namespace_with_every_reference_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    legacy_store(&store);

    assert_eq!(scope_model_names(&store, 7).unwrap(), 2);

    let keys: Vec<String> = store
        .model_versions()
        .unwrap()
        .iter()
        .map(|v| v.key())
        .collect();
    assert_eq!(
        keys,
        [
            "@acme.llama:v1",
            "@acme.llama:v10",
            "@acme.llama:v9",
            "base:v1"
        ],
        "the operator's and already scoped versions keep their names"
    );
    let v9 = store.model_version("@acme.llama:v9").unwrap().unwrap();
    assert_eq!(
        (v9.spec.name.as_str(), v9.owner.as_deref(), v9.pinned),
        ("@acme.llama", Some("acme"), true),
        "only the name changes"
    );
    let v10 = store.model_version("@acme.llama:v10").unwrap().unwrap();
    assert_eq!(
        v10.retire.unwrap().replace_with.as_deref(),
        Some("@acme.llama:v9")
    );
    let svc = store.task("acme/svc").unwrap().unwrap();
    assert_eq!(svc.spec.model.as_deref(), Some("@acme.llama:v10"));
    assert_eq!(svc.serving_model.as_deref(), Some("@acme.llama:v10"));
    let s = svc.swap.unwrap();
    assert_eq!(
        (s.from.to_string(), s.to.to_string()),
        ("@acme.llama:v10".into(), "@acme.llama:v9".into())
    );
    let bill = store.open_billing("svc.1").unwrap().unwrap();
    assert_eq!(bill.model.as_deref(), Some("@acme.llama:v10"));
    assert_eq!(bill.model_marks[0].model, "@acme.llama:v9");
    let zeta = store.task("zeta/job").unwrap().unwrap();
    assert_eq!(zeta.spec.model.as_deref(), Some("base:v1"));

    let filter = EventFilter {
        kind: Some(EventKind::ModelRenamed),
        ..Default::default()
    };
    let events = store.events(&filter, 0, 10).unwrap();
    let said: Vec<(Option<&str>, &serde_json::Value)> = events
        .iter()
        .map(|e| (e.tenant.as_deref(), e.detail.as_ref().unwrap()))
        .collect();
    assert_eq!(
        said,
        [
            (
                Some("acme"),
                &serde_json::json!({"old": "llama:v10", "new": "@acme.llama:v10"})
            ),
            (
                Some("acme"),
                &serde_json::json!({"old": "llama:v9", "new": "@acme.llama:v9"})
            ),
        ]
    );

    // Once: a second boot finds nothing to move and writes nothing.
    let last = store.last_event_seq();
    assert_eq!(scope_model_names(&store, 8).unwrap(), 0);
    assert_eq!(store.last_event_seq(), last);
}

#[test]
fn a_scoped_name_already_taken_gets_the_next_free_suffix() {
    let versions = [
        version("llama", "v1", Some("acme")),
        version("@acme.llama", "v1", Some("acme")),
        version("@acme.llama-2", "v1", Some("acme")),
        version("@zeta.llama", "v1", Some("acme")),
        version("llama", "v2", None),
    ];
    let renames = plan(&versions);
    assert_eq!(
        renames.into_iter().collect::<Vec<_>>(),
        [
            (
                "@zeta.llama:v1".to_string(),
                "@acme.zeta.llama:v1".to_string()
            ),
            ("llama:v1".to_string(), "@acme.llama-3:v1".to_string()),
        ]
    );
}
