//! The directory of live actors, so that any actor (or the gateway) can reach
//! a task, node or tenant by name. A directory only: each actor owns its state.
use crate::node::NodeActor;
use crate::task::TaskActor;
use crate::tenant::TenantActor;
use actix::Addr;
use std::collections::HashMap;
use std::sync::RwLock;

#[derive(Default)]
pub struct Registry {
    tasks: RwLock<HashMap<String, Addr<TaskActor>>>,
    nodes: RwLock<HashMap<String, Addr<NodeActor>>>,
    tenants: RwLock<HashMap<String, Addr<TenantActor>>>,
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
    pub fn task(&self, id: &str) -> Option<Addr<TaskActor>> {
        get(&self.tasks, id)
    }
    pub fn add_task(&self, id: &str, a: Addr<TaskActor>) {
        put(&self.tasks, id, a)
    }
    pub fn remove_task(&self, id: &str) {
        remove(&self.tasks, id)
    }
    pub fn live_tasks(&self) -> usize {
        self.tasks.read().map(|m| m.len()).unwrap_or(0)
    }
    pub fn node(&self, name: &str) -> Option<Addr<NodeActor>> {
        get(&self.nodes, name)
    }
    pub fn add_node(&self, name: &str, a: Addr<NodeActor>) {
        put(&self.nodes, name, a)
    }
    pub fn nodes(&self) -> Vec<(String, Addr<NodeActor>)> {
        self.nodes
            .read()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
    pub fn tenant(&self, name: &str) -> Option<Addr<TenantActor>> {
        get(&self.tenants, name)
    }
    pub fn add_tenant(&self, name: &str, a: Addr<TenantActor>) {
        put(&self.tenants, name, a)
    }
    pub fn tenants(&self) -> Vec<(String, Addr<TenantActor>)> {
        self.tenants
            .read()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
}
