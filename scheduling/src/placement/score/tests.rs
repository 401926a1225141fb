//! Each policy's score on hand-built node states, with the arithmetic in the
//! comments (kube-scheduler style tables).
use super::*;
use crate::placement::frag::{free_vector, FragTable};
use crate::placement::state::{GpuState, NodeState};
use crate::placement::types::GpuDemand;

const NORM: Norm = Norm {
    max_cpu: 128_000.0,
    max_gpu: 8000.0,
};

/// An 8-GPU (or `free.len()`-GPU) node of 96 cores with the given free milli per GPU.
fn node(free: &[u64], cpu_free: u64) -> NodeState {
    NodeState {
        healthy: true,
        cordoned: false,
        exclusive_held: false,
        in_use: free.iter().any(|&f| f < 1000) || cpu_free < 96_000,
        labels: Default::default(),
        container_runtime: false,
        cpu_capacity: 96_000,
        cpu_free,
        memory_capacity: 393_216,
        memory_free: 393_216,
        disk_capacity: 0,
        disk_free: 0,
        gpus: {
            let mut g: Vec<GpuState> = free
                .iter()
                .map(|&f| GpuState {
                    model: "G2".into(),
                    capacity: 1000,
                    free: f,
                })
                .collect();
            g.sort();
            g
        },
        kinds: vec![],
    }
}

fn demand(gpu: GpuDemand, cores: u64) -> Demand {
    Demand {
        gpu,
        cpu_milli: cores * 1000,
        ..Demand::default()
    }
}

fn ctx<'a>(state: &'a NodeState, demand: &'a Demand, frag: Option<&'a ClassFrag>) -> ScoreCtx<'a> {
    ScoreCtx {
        state,
        demand,
        norm: NORM,
        frag,
    }
}

/// A policy's score of `state` for `demand`, without fragmentation data.
fn score_of(
    policy: fn(&ScoreCtx) -> Option<Scored>,
    state: &NodeState,
    demand: &Demand,
) -> Option<f64> {
    policy(&ctx(state, demand, None)).map(|s| s.score)
}

#[test]
fn dotprod_prefers_the_node_least_aligned_with_the_request() {
    let d = demand(GpuDemand::Whole { count: 1 }, 8);
    // 64 cores + 4 GPUs free: dot = (64/128)(8/128) + (4000/8000)(1000/8000)
    //   = 0.03125 + 0.0625 = 0.09375; score = trunc(100 * (1 - 0.046875)) = 95.
    let half = node(&[1000, 1000, 1000, 1000, 0, 0, 0, 0], 64_000);
    assert_eq!(score_of(dotprod::score, &half, &d), Some(95.0));
    // 96 cores + 8 GPUs: dot = 0.75*0.0625 + 1*0.125 = 0.171875 -> trunc(91.4) = 91.
    let empty = node(&[1000; 8], 96_000);
    assert_eq!(score_of(dotprod::score, &empty, &d), Some(91.0));
}

#[test]
fn bestfit_prefers_the_node_left_fullest() {
    let d = demand(GpuDemand::Whole { count: 1 }, 8);
    // Empty: left 88/128 = 0.6875 and 7/8 = 0.875 -> 1 - 0.78125 -> trunc(21.875) = 21.
    let empty = node(&[1000; 8], 96_000);
    assert_eq!(score_of(bestfit::score, &empty, &d), Some(21.0));
    // 16 cores + 1 GPU free: left 8/128 and 0/8 -> 1 - 0.03125 -> trunc(96.875) = 96.
    let full = node(&[1000, 0, 0, 0, 0, 0, 0, 0], 16_000);
    assert_eq!(score_of(bestfit::score, &full, &d), Some(96.0));
}

#[test]
fn gpupacking_tiers_shared_then_used_then_empty() {
    let share = demand(GpuDemand::Share { milli: 300 }, 2);
    // Fits on the GPU with 400 free (least free that fits): 100 - (40)/10 = 96.
    let used = node(&[400, 1000, 1000, 1000, 1000, 1000, 1000, 1000], 90_000);
    let s = gpupacking::score(&ctx(&used, &share, None)).expect("fits");
    assert_eq!((s.score, s.gpus.len()), (96.0, 1));
    // Must take an idle GPU on a used node: max(50 - 1, 33) = 49.
    let whole = demand(GpuDemand::Whole { count: 1 }, 2);
    assert_eq!(score_of(gpupacking::score, &used, &whole), Some(49.0));
    // Empty 8-GPU node: max(33 - 8, 8) = 25.
    let empty = node(&[1000; 8], 96_000);
    assert_eq!(score_of(gpupacking::score, &empty, &share), Some(25.0));
}

#[test]
fn gpuclustering_prefers_nodes_running_the_same_kind() {
    let share = demand(GpuDemand::Share { milli: 300 }, 2);
    // 3 GPUs free, only sharing tasks: 25 * (8000 - 3000) / 8000 = 15 (integer) + 75 = 90.
    let mut same = node(&[1000, 1000, 1000, 0, 0, 0, 0, 0], 50_000);
    same.kinds = vec![(0, 4)];
    assert_eq!(score_of(gpuclustering::score, &same, &share), Some(90.0));
    // Same fill, running 1-GPU tasks only: 15 + 0 = 15.
    let mut other = same.clone();
    other.kinds = vec![(1, 5)];
    assert_eq!(score_of(gpuclustering::score, &other, &share), Some(15.0));
    // Empty node: 0 + 25 = 25.
    let empty = node(&[1000; 8], 96_000);
    assert_eq!(score_of(gpuclustering::score, &empty, &share), Some(25.0));
}

/// Fragmentation data as FGD measures it (one-copy test, CPU only).
fn class_frag(state: &NodeState, shapes: &[(&Demand, f64)]) -> ClassFrag {
    with_table(
        state,
        FragTable::build(state, shapes.iter().copied(), false),
    )
}

/// Fragmentation data as caldera measures it (capacity, memory counted).
fn caldera_frag(state: &NodeState, shapes: &[(&Demand, f64)]) -> ClassFrag {
    let table = FragTable::build(state, shapes.iter().copied(), true).with_capacity();
    with_table(state, table)
}

fn with_table(state: &NodeState, table: FragTable) -> ClassFrag {
    let free = free_vector(state);
    let before = table.frag(&free, state.cpu_free, state.memory_free);
    ClassFrag {
        table,
        free,
        before,
        cpu_per_gpu: 0.0,
        memory_per_gpu: 0.0,
        model_pressure: 0.0,
        holes: Vec::new(),
    }
}

#[test]
fn fgd_fills_the_fragment_and_picks_that_gpu() {
    // Mix: half 0.5-GPU tasks, half 1-GPU tasks.
    let half = demand(GpuDemand::Share { milli: 500 }, 4);
    let one = demand(GpuDemand::Whole { count: 1 }, 8);
    let shapes = [(&half, 0.5), (&one, 0.5)];
    // GPUs free: 500, 1000, 1000, 1000 (4-GPU node). Fragmentation before: the
    // 500 GPU is too small for the 1-GPU shape: 0.5 * 500 = 250.
    let state = node(&[500, 1000, 1000, 1000], 96_000);
    let frag = class_frag(&state, &shapes);
    assert!((frag.before - 250.0).abs() < 1e-9);
    // A 0.5 task on the 500 GPU leaves 0, 1000, 1000, 1000: fragmentation 0,
    // growth -250 -> trunc(100 * sigmoid(0.25)) = trunc(56.2) = 56. On an idle
    // GPU it would leave 500, 500, 1000, 1000: 0.5 * 1000 = 500, growth +250 -> 43.
    let s = fgd::score(&ctx(&state, &half, Some(&frag))).expect("fits");
    assert_eq!(s.score, 56.0);
    assert_eq!(s.gpus, vec![(0, 500)], "the 500-free GPU sorts first");
}

#[test]
fn caldera_breaks_fgd_ties_toward_the_fuller_node() {
    let one = demand(GpuDemand::Whole { count: 1 }, 8);
    let shapes = [(&one, 1.0)];
    // Both nodes keep zero fragmentation when a 1-GPU task takes an idle GPU
    // (growth 0), so FGD ties; caldera adds 0.1 * fit (BestFit closeness):
    // empty 8-GPU node: fit = 1 - (88/128 + 7000/8000)/2 = 0.21875 -> 0.021875;
    // node with 2 idle GPUs and 24 cores: fit = 1 - (16/128 + 1000/8000)/2 = 0.875.
    let empty = node(&[1000; 8], 96_000);
    let full = node(&[1000, 1000, 0, 0, 0, 0, 0, 0], 24_000);
    let (fe, ff) = (caldera_frag(&empty, &shapes), caldera_frag(&full, &shapes));
    let a = caldera::score(&ctx(&empty, &one, Some(&fe)))
        .expect("fits")
        .score;
    let b = caldera::score(&ctx(&full, &one, Some(&ff)))
        .expect("fits")
        .score;
    assert!((a - 0.021875).abs() < 1e-9, "{a}");
    assert!((b - 0.0875).abs() < 1e-9, "{b}");
}

#[test]
fn capacity_fragmentation_sees_cpu_running_out_first() {
    // 8 idle GPUs but 40 cores: a 1-GPU, 11.3-core shape fits 3 times
    // (40 / 11.3 = 3.5), so 8000 - 3 * 1000 = 5000 milli are stranded. FGD's
    // one-copy test says 0.
    let shape = demand(GpuDemand::Whole { count: 1 }, 0);
    let shape = Demand {
        cpu_milli: 11_300,
        ..shape
    };
    let state = node(&[1000; 8], 40_000);
    let fgd = FragTable::build(&state, [(&shape, 1.0)], false);
    let cap = FragTable::build(&state, [(&shape, 1.0)], false).with_capacity();
    let free = free_vector(&state);
    assert_eq!(fgd.frag(&free, 40_000, 0), 0.0);
    assert_eq!(cap.frag(&free, 40_000, 0), 5000.0);
}

#[test]
fn random_scores_every_feasible_node_alike() {
    let d = demand(GpuDemand::Share { milli: 300 }, 2);
    let a = node(&[1000; 8], 96_000);
    let b = node(&[400, 0, 0, 0], 10_000);
    assert_eq!(
        score_of(random::score, &a, &d),
        score_of(random::score, &b, &d)
    );
}

#[test]
fn caldera_joins_the_hole_that_leaves_fillable_room() {
    use crate::placement::holes::HoleValues;
    use std::sync::Arc;
    // Mix: 0.47 and 0.32 sharing tasks, half each (both always arrive).
    let big = demand(GpuDemand::Share { milli: 470 }, 4);
    let small = demand(GpuDemand::Share { milli: 320 }, 4);
    let shapes = [(&big, 0.5), (&small, 0.5)];
    // Two GPUs, one holding a 0.47 (530 free), one a 0.32 (680 free).
    let state = node(&[530, 680], 96_000);
    let mut frag = class_frag(&state, &shapes);
    let holes = Arc::new(HoleValues::from_sizes(&[(470, 0.5), (320, 0.5)], 0.045));
    frag.holes = vec![holes.clone(), holes];
    let c = ctx(&state, &big, Some(&frag));
    // Hole values: V(60) = 60 and V(210) = 210 (nothing fits); V(530) = V(60) =
    // 60 (a 0.47 comes); V(360) = V(40) = 40, so V(680) = V(360) = 40.
    // A 0.47 on GPU 0: V(60) - V(530) = 0. On GPU 1: V(210) - V(680) = 170.
    assert_eq!(caldera::hole_growth(&c, &[(0, 470)]), 0.0);
    assert_eq!(caldera::hole_growth(&c, &[(1, 470)]), 170.0);
    let s = caldera::score(&c).expect("fits");
    assert_eq!(s.gpus, vec![(0, 470)], "joins the other 0.47");
    // Whole-GPU and CPU-only tasks leave no hole.
    let one = demand(GpuDemand::Whole { count: 1 }, 4);
    assert_eq!(
        caldera::hole_growth(&ctx(&state, &one, Some(&frag)), &[]),
        0.0
    );
}

#[test]
fn caldera_puts_equal_choices_on_the_fullest_gpu() {
    use crate::placement::holes::HoleValues;
    use std::sync::Arc;
    // A one-shape mix (0.44 of a GPU) scores a 0.56 hole and an idle GPU
    // alike: capacity fragmentation is 1000 - 2 * 440 = 120 per idle GPU and
    // 560 - 440 = 120 on the hole either way, and V(1000) = V(560) = V(120) =
    // 120. The tie goes to the GPU left fullest: the hole (0.12 left), not an
    // idle GPU (0.56 left), so whole GPUs stay free.
    let share = demand(GpuDemand::Share { milli: 440 }, 1);
    let state = node(&[1000, 560, 1000, 1000], 96_000);
    let mut frag = caldera_frag(&state, &[(&share, 1.0)]);
    let holes = Arc::new(HoleValues::from_sizes(&[(440, 1.0)], 0.045));
    frag.holes = vec![holes; 4];
    let c = ctx(&state, &share, Some(&frag));
    // Canonical order puts the 560-free GPU first.
    assert_eq!(state.gpus[0].free, 560);
    assert_eq!(fgd::frag_growth(&c, &[(0, 440)]), 0.0);
    assert_eq!(fgd::frag_growth(&c, &[(1, 440)]), 0.0);
    assert_eq!(caldera::hole_growth(&c, &[(0, 440)]), 0.0);
    assert_eq!(caldera::hole_growth(&c, &[(1, 440)]), 0.0);
    let s = caldera::score(&c).expect("fits");
    assert_eq!(s.gpus.len(), 1);
    assert_eq!(state.gpus[s.gpus[0].0].free, 560, "{:?}", s.gpus);
}
