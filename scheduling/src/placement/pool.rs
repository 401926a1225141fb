//! The in-memory index of nodes and their free capacity per GPU. The Scheduler
//! actor owns one and is its only writer; placement reads it.
//!
//! Nodes are grouped into classes of identical [`NodeState`]: filters and scores
//! are pure functions of that state, so a decision evaluates each class once.
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use super::errors::PlacementError;
use super::fit;
use super::state::{canonical_order, NodeState, TaskKind};
use super::types::{Demand, GpuDemand, GpuUnit, NodeId, NodeView, Placement};

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// Handle of a class: slot and generation (slots are reused, generations not),
/// so a `ClassHandle` names one immutable state forever and can key caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClassHandle {
    /// Slot in the class table.
    pub slot: u32,
    /// Generation of the slot.
    pub generation: u32,
}

impl ClassHandle {
    /// Packed form for cache keys.
    pub fn key(self) -> u64 {
        ((self.slot as u64) << 32) | self.generation as u64
    }
}

/// Nodes sharing one state.
#[derive(Debug, Clone)]
pub struct Class {
    /// This class's handle.
    pub handle: ClassHandle,
    /// The shared state.
    pub state: NodeState,
    /// Member nodes (unordered).
    pub members: Vec<NodeId>,
}

#[derive(Debug, Clone, Default)]
struct NodeEntry {
    view: NodeView,
    kinds: BTreeMap<TaskKind, u32>,
    slot: u32,
    pos: usize,
}

/// The pool: nodes, their free room per GPU, grouped by state.
#[derive(Debug)]
pub struct Pool {
    unit: GpuUnit,
    id: u64,
    nodes: Vec<NodeEntry>,
    by_name: HashMap<String, NodeId>,
    slots: Vec<Option<Class>>,
    generations: Vec<u32>,
    free_slots: Vec<u32>,
    by_state: super::hash::FxHashMap<NodeState, u32>,
    max_cpu: u64,
    max_gpu_milli: u64,
    gpus_by_model: std::collections::BTreeMap<String, u64>,
}

impl Pool {
    /// An empty pool counting GPU room in `unit`.
    pub fn new(unit: GpuUnit) -> Self {
        Pool {
            unit,
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            nodes: Vec::new(),
            by_name: HashMap::new(),
            slots: Vec::new(),
            generations: Vec::new(),
            free_slots: Vec::new(),
            by_state: Default::default(),
            max_cpu: 0,
            max_gpu_milli: 0,
            gpus_by_model: Default::default(),
        }
    }

    /// Largest node CPU (milli-cores) and GPU capacity (milli-GPUs) ever seen:
    /// what scores normalise by (never below 1).
    pub fn max_sizes(&self) -> (u64, u64) {
        (self.max_cpu.max(1), self.max_gpu_milli.max(1))
    }

    /// Share of the pool's GPUs of `model` (0 when the pool has no GPUs).
    pub fn model_share(&self, model: &str) -> f64 {
        let total: u64 = self.gpus_by_model.values().sum();
        match self.gpus_by_model.get(model) {
            Some(&n) if total > 0 => n as f64 / total as f64,
            _ => 0.0,
        }
    }

    /// Number of GPUs per model (changes only when nodes are added or replaced).
    pub fn gpu_count(&self) -> u64 {
        self.gpus_by_model.values().sum()
    }

    /// Number of class slots (some may be empty); see [`Pool::class_at`].
    pub fn class_slots(&self) -> usize {
        self.slots.len()
    }

    /// The live class in `slot`, if any.
    pub fn class_at(&self, slot: usize) -> Option<&Class> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    /// Unit of GPU room.
    pub fn unit(&self) -> GpuUnit {
        self.unit
    }

    /// Process-unique id of this pool (lets a `Placer` know its caches apply).
    pub fn instance_id(&self) -> u64 {
        self.id
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the pool has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Add a node, or replace the capacity and health of the node with the same
    /// name (keeping its id and its record of running task kinds).
    pub fn upsert_node(&mut self, view: NodeView) -> NodeId {
        self.max_cpu = self.max_cpu.max(view.cpu_capacity_milli);
        self.max_gpu_milli = self.max_gpu_milli.max(view.gpus.len() as u64 * 1000);
        if let Some(&id) = self.by_name.get(&view.name) {
            for g in &self.nodes[id.0 as usize].view.gpus {
                if let Some(n) = self.gpus_by_model.get_mut(&g.model) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        for g in &view.gpus {
            *self.gpus_by_model.entry(g.model.clone()).or_insert(0) += 1;
        }
        if let Some(&id) = self.by_name.get(&view.name) {
            self.nodes[id.0 as usize].view = view;
            self.reclass(id);
            return id;
        }
        let id = NodeId(self.nodes.len() as u32);
        self.by_name.insert(view.name.clone(), id);
        self.nodes.push(NodeEntry {
            view,
            kinds: BTreeMap::new(),
            slot: u32::MAX,
            pos: 0,
        });
        self.attach(id);
        id
    }

    /// Id of the node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The node's current view.
    pub fn node(&self, id: NodeId) -> Option<&NodeView> {
        self.nodes.get(id.0 as usize).map(|e| &e.view)
    }

    /// Mark a node healthy or not (unknown ids are ignored).
    pub fn set_healthy(&mut self, id: NodeId, healthy: bool) {
        if let Some(e) = self.nodes.get_mut(id.0 as usize) {
            if e.view.healthy != healthy {
                e.view.healthy = healthy;
                self.reclass(id);
            }
        }
    }

    /// Replace what a node's weight cache holds (from its cache report).
    /// The node keeps its class: cache contents are looked at per node, by
    /// the weights filter and the cache term, never by class.
    pub fn set_weights(&mut self, id: NodeId, weights: super::types::NodeWeights) {
        if let Some(e) = self.nodes.get_mut(id.0 as usize) {
            e.view.weights = weights;
        }
    }

    /// Every node with its id.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &NodeView)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, e)| (NodeId(i as u32), &e.view))
    }

    /// Live classes (each non-empty).
    pub fn classes(&self) -> impl Iterator<Item = &Class> {
        self.slots.iter().flatten()
    }

    /// Number of live classes (distinct node states).
    pub fn class_count(&self) -> usize {
        self.by_state.len()
    }

    /// The class a node belongs to.
    pub fn class_of(&self, id: NodeId) -> Option<&Class> {
        let e = self.nodes.get(id.0 as usize)?;
        self.slots.get(e.slot as usize)?.as_ref()
    }

    /// Subtract a placement from the pool. Refuses (changing nothing) when the
    /// node does not have the room, so the ledger can never go negative.
    pub fn commit(&mut self, demand: &Demand, placement: &Placement) -> Result<(), PlacementError> {
        let node = placement.node;
        let entry = self
            .nodes
            .get(node.0 as usize)
            .ok_or(PlacementError::UnknownNode(node))?;
        fit::validate(&entry.view, demand, placement)?;
        let entry = &mut self.nodes[node.0 as usize];
        let v = &mut entry.view;
        for &(index, units) in &placement.gpus {
            if let Some(g) = v.gpus.iter_mut().find(|g| g.index == index) {
                g.free -= units;
            }
        }
        v.cpu_free_milli -= demand.cpu_milli;
        v.memory_free_mib -= demand.memory_mib;
        v.disk_free_mib -= demand.disk_mib;
        v.allocations += 1;
        if demand.exclusive {
            v.exclusive_held = true;
        }
        if let Some(kind) = task_kind(&demand.gpu) {
            *entry.kinds.entry(kind).or_insert(0) += 1;
        }
        self.reclass(node);
        Ok(())
    }

    /// Give a placement's resources back (saturating at capacity; unknown nodes
    /// and GPUs are ignored: the node may have been re-registered meanwhile).
    pub fn release(&mut self, demand: &Demand, placement: &Placement) {
        let node = placement.node;
        let Some(entry) = self.nodes.get_mut(node.0 as usize) else {
            return;
        };
        let v = &mut entry.view;
        for &(index, units) in &placement.gpus {
            if let Some(g) = v.gpus.iter_mut().find(|g| g.index == index) {
                g.free = g.free.saturating_add(units).min(g.capacity);
            }
        }
        v.cpu_free_milli = v
            .cpu_free_milli
            .saturating_add(demand.cpu_milli)
            .min(v.cpu_capacity_milli);
        v.memory_free_mib = v
            .memory_free_mib
            .saturating_add(demand.memory_mib)
            .min(v.memory_capacity_mib);
        v.disk_free_mib = v
            .disk_free_mib
            .saturating_add(demand.disk_mib)
            .min(v.disk_capacity_mib);
        v.allocations = v.allocations.saturating_sub(1);
        if demand.exclusive {
            v.exclusive_held = false;
        }
        if let Some(kind) = task_kind(&demand.gpu) {
            if let Some(n) = entry.kinds.get_mut(&kind) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    entry.kinds.remove(&kind);
                }
            }
        }
        self.reclass(node);
    }

    /// Turn a placement computed on canonical GPU positions of `node` into
    /// device indices. `takes[p]` = units taken at canonical position `p`.
    pub fn placement_from_positions(&self, node: NodeId, takes: &[(usize, u64)]) -> Placement {
        let gpus = match self.node(node) {
            Some(view) => {
                let order = canonical_order(view);
                takes
                    .iter()
                    .filter_map(|&(p, u)| order.get(p).map(|&i| (view.gpus[i].index, u)))
                    .collect()
            }
            None => Vec::new(),
        };
        Placement { node, gpus }
    }

    fn reclass(&mut self, id: NodeId) {
        self.detach(id);
        self.attach(id);
    }

    fn detach(&mut self, id: NodeId) {
        let (slot, pos) = {
            let e = &self.nodes[id.0 as usize];
            (e.slot, e.pos)
        };
        let Some(Some(class)) = self.slots.get_mut(slot as usize) else {
            return;
        };
        class.members.swap_remove(pos);
        if let Some(&moved) = class.members.get(pos) {
            self.nodes[moved.0 as usize].pos = pos;
        }
        if class.members.is_empty() {
            if let Some(c) = self.slots[slot as usize].take() {
                self.by_state.remove(&c.state);
            }
            self.free_slots.push(slot);
        }
        self.nodes[id.0 as usize].slot = u32::MAX;
    }

    fn attach(&mut self, id: NodeId) {
        let e = &self.nodes[id.0 as usize];
        let state = NodeState::of(&e.view, &e.kinds);
        let slot = match self.by_state.get(&state) {
            Some(&slot) => slot,
            None => self.new_class(state),
        };
        if let Some(Some(class)) = self.slots.get_mut(slot as usize) {
            class.members.push(id);
            let pos = class.members.len() - 1;
            let e = &mut self.nodes[id.0 as usize];
            e.slot = slot;
            e.pos = pos;
        }
    }

    fn new_class(&mut self, state: NodeState) -> u32 {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.generations[s as usize] += 1;
                s
            }
            None => {
                self.slots.push(None);
                self.generations.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let handle = ClassHandle {
            slot,
            generation: self.generations[slot as usize],
        };
        self.by_state.insert(state.clone(), slot);
        self.slots[slot as usize] = Some(Class {
            handle,
            state,
            members: Vec::new(),
        });
        slot
    }
}

/// GPU-clustering kind of a demand: `Some(0)` sharing, `Some(k)` k whole GPUs.
pub fn task_kind(gpu: &GpuDemand) -> Option<TaskKind> {
    match gpu {
        GpuDemand::None => None,
        g if g.is_sharing() => Some(0),
        g => Some(g.count()),
    }
}
