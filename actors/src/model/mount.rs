//! What a start or a swap command names of a model version: its mount,
//! read from the version's record.
use caldera_spec::weights::ModelMount;
use caldera_storage::Store;

/// The mount of the version `key` (`name:version`), from its record; None
/// when it is gone or unreadable (a start then carries no model, a swap
/// waits for the next turn).
pub fn mount_of_version(store: &Store, key: &str) -> Option<ModelMount> {
    let rec = store.model_version(key).ok()??;
    Some(ModelMount {
        name: rec.spec.name.clone(),
        version: rec.spec.version.clone(),
        sha256: rec.spec.weights.sha256.clone(),
        size_bytes: rec.spec.weights.size_bytes,
        private: rec.owner.is_some(),
        owner: rec.owner.clone(),
    })
}
