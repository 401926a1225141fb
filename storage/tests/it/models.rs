//! Model version records: written in a batch, read back by key and in key
//! order, and still there after the store is closed and opened again.
use crate::common;
use caldera_spec::{
    CopyState, ModelState, ModelVersionRecord, ModelVersionSpec, NodeCopy, WeightsSpec,
};

fn version(name: &str, version: &str) -> ModelVersionRecord {
    let mut nodes = std::collections::BTreeMap::new();
    nodes.insert(
        "node-1".to_string(),
        NodeCopy::new(CopyState::Warming, 7, "peer node-2"),
    );
    ModelVersionRecord {
        spec: ModelVersionSpec {
            name: name.into(),
            version: version.into(),
            weights: WeightsSpec {
                uri: "http://store:9000/m.bin".into(),
                size_bytes: 10,
                sha256: "cd".repeat(32),
            },
            image: None,
        },
        state: ModelState::Active,
        pinned: true,
        registered_at_ms: 5,
        owner: Some("acme".into()),
        nodes,
        tasks: ["acme/svc.r0".to_string()].into(),
        retire: None,
        checkpoint: None,
    }
}

#[test]
fn model_versions_survive_a_reopen_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (version("llama", "v2"), version("llama", "v1"));
    {
        let store = common::open(dir.path());
        let mut batch = store.batch();
        batch.put_model_version(&a);
        batch.put_model_version(&b);
        store.commit(batch).unwrap();
        store.flush().unwrap();
    }
    // The first handle's flusher may hold the lock a moment past its drop.
    let store = common::open(dir.path());
    assert_eq!(store.model_version("llama:v2").unwrap(), Some(a.clone()));
    assert_eq!(store.model_version("llama:v3").unwrap(), None);
    assert_eq!(store.model_versions().unwrap(), vec![b, a]);
}
