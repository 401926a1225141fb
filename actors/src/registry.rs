//! The directory of live actors, so that any actor (or the gateway) can reach
//! a task, service, node or tenant by name. A directory only: each actor owns its state.
//! It holds typed handles from the protocol, never actor types.
use crate::protocol::{ModelHandle, NodeHandle, ServiceHandle, TaskHandle, TenantHandle};
use std::collections::HashMap;
use std::sync::RwLock;

#[derive(Default)]
pub struct Registry {
    tasks: RwLock<HashMap<String, TaskHandle>>,
    /// Inference services by their key; their replicas are in `tasks`.
    services: RwLock<HashMap<String, ServiceHandle>>,
    nodes: RwLock<HashMap<String, NodeHandle>>,
    tenants: RwLock<HashMap<String, TenantHandle>>,
    /// Model versions by `name:version`, with their weights' SHA-256 (a
    /// node reports on a copy by SHA-256; two versions may share one).
    models: RwLock<HashMap<String, (String, ModelHandle)>>,
}

fn get<T: Clone>(m: &RwLock<HashMap<String, T>>, k: &str) -> Option<T> {
    m.read().ok()?.get(k).cloned()
}

fn put<T>(m: &RwLock<HashMap<String, T>>, k: &str, v: T) {
    if let Ok(mut g) = m.write() {
        g.insert(k.to_string(), v);
    }
}

fn remove<T>(m: &RwLock<HashMap<String, T>>, k: &str) {
    if let Ok(mut g) = m.write() {
        g.remove(k);
    }
}

impl Registry {
    pub fn task(&self, id: &str) -> Option<TaskHandle> {
        get(&self.tasks, id)
    }
    pub fn add_task(&self, id: &str, a: TaskHandle) {
        put(&self.tasks, id, a)
    }
    pub fn remove_task(&self, id: &str) {
        remove(&self.tasks, id)
    }
    /// Every live task's handle, by id.
    pub fn tasks(&self) -> Vec<(String, TaskHandle)> {
        self.tasks
            .read()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
    /// Live tasks, services counted: a service is a task to its tenant.
    pub fn live_tasks(&self) -> usize {
        let tasks = self.tasks.read().map(|m| m.len()).unwrap_or(0);
        tasks + self.services.read().map(|m| m.len()).unwrap_or(0)
    }
    pub fn service(&self, id: &str) -> Option<ServiceHandle> {
        get(&self.services, id)
    }
    pub fn add_service(&self, id: &str, a: ServiceHandle) {
        put(&self.services, id, a)
    }
    pub fn remove_service(&self, id: &str) {
        remove(&self.services, id)
    }
    /// Every live service's handle, by key.
    pub fn services(&self) -> Vec<(String, ServiceHandle)> {
        self.services
            .read()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
    pub fn node(&self, name: &str) -> Option<NodeHandle> {
        get(&self.nodes, name)
    }
    pub fn add_node(&self, name: &str, a: NodeHandle) {
        put(&self.nodes, name, a)
    }
    pub fn nodes(&self) -> Vec<(String, NodeHandle)> {
        self.nodes
            .read()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
    pub fn model(&self, key: &str) -> Option<ModelHandle> {
        self.models.read().ok()?.get(key).map(|(_, h)| h.clone())
    }
    pub fn add_model(&self, key: &str, sha256: &str, a: ModelHandle) {
        put(&self.models, key, (sha256.to_string(), a))
    }
    /// Every version, by `name:version`.
    pub fn models(&self) -> Vec<(String, ModelHandle)> {
        self.models
            .read()
            .map(|m| m.iter().map(|(k, (_, h))| (k.clone(), h.clone())).collect())
            .unwrap_or_default()
    }
    /// The versions whose weights hash to `sha256`.
    pub fn models_with_sha(&self, sha256: &str) -> Vec<ModelHandle> {
        self.models
            .read()
            .map(|m| {
                m.values()
                    .filter(|(s, _)| s == sha256)
                    .map(|(_, h)| h.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn tenant(&self, name: &str) -> Option<TenantHandle> {
        get(&self.tenants, name)
    }
    pub fn add_tenant(&self, name: &str, a: TenantHandle) {
        put(&self.tenants, name, a)
    }
    pub fn tenants(&self) -> Vec<(String, TenantHandle)> {
        self.tenants
            .read()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
}
