//! Hole values: how much of a GPU's free room (its "hole") is expected to stay
//! unallocated for good, given the typical mix of request sizes.
//!
//! Why: on the Alibaba trace nearly all GPUs a fragmentation-aware placer leaves
//! unallocated are holes on shared GPUs, not idle GPUs. A 0.47-GPU task put next
//! to a 0.32 one leaves a 0.21 hole that almost nothing in the mix fits: dead
//! room. Put next to another 0.47 it leaves 0.06. FGD's measure sees both holes
//! as "too small for most shapes" and cannot tell them apart; the hole value can,
//! because it follows the chain of sizes that may still arrive to fill a hole.
//!
//! Model: a hole of `h` milli-GPUs waits for the sizes that fit in it. Sorted by
//! the value of what they would leave behind, the best size arrives with
//! probability `a_1`, else the next best with `a_2`, and so on; if none comes the
//! hole stays dead:
//!
//! `V(h) = sum_i [prod_{j<i} (1 - a_j)] * a_i * V(h - s_i) + [prod_i (1 - a_i)] * h`
//!
//! over the sizes `s_i <= h`, where `a_i = min(1, f_i / supply)`, `f_i` the
//! size's share of requests and `supply` [`SUPPLY`] times the share of sharing
//! requests: a size common among sharing requests always comes; rarer sizes
//! are a gamble in proportion. `V(0) = 0`; whole-GPU shapes are a size of 1000.
//!
//! Worked example (sizes 470 with f = 0.09 and 160 with f = 0.006, supply = 0.015):
//! `a(470) = 1`, `a(160) = 0.4`.
//! * V(60) = 60: nothing fits.
//! * V(190) = 0.4 * V(30) + 0.6 * 190 = 12 + 114 = 126.
//! * V(530) = V(60) = 60: a 470 surely comes.
//! * V(350) = 0.4 * V(190) + 0.6 * 350 = 260.4.
//! * V(210) = 0.4 * V(50) + 0.6 * 210 = 146.
//!
//! So a 0.32 task put into a 0.53 hole (0.21 left) changes the expected dead
//! room by 146 - 60 = 86, put into a 0.35 hole (0.03 left) by 30 - 260.4 =
//! -230.4: the score takes the second.
use super::mix::WorkloadMix;

/// Share of the sharing requests at which a size counts as certain to arrive
/// for a hole; rarer sizes count in proportion. Relative to sharing requests,
/// not to all requests, because holes are made by sharing tasks: where sharing
/// is common (the `gpushare60` trace) a size must be common among them too.
/// Measured on the Alibaba traces (docs/benchmarks/placement.md): 0.03-0.06 land within 4
/// GPUs of each other on `default` and `gpushare60`; an absolute 0.01 of all
/// requests made sharing tasks open idle GPUs on `gpushare60` and lost 7
/// points at 100%.
pub const SUPPLY: f64 = 0.045;

/// Expected dead room (milli-GPUs) of a hole of each size 0..=1000 on one GPU
/// type; see the module comment.
#[derive(Debug, Clone, PartialEq)]
pub struct HoleValues {
    value: Vec<f64>,
}

impl HoleValues {
    /// Hole values on a GPU of `model` with `capacity` units, from the sizes
    /// (in milli of this GPU) the mix's one-GPU shapes would take on it.
    pub fn build(mix: &WorkloadMix, model: &str, capacity: u64) -> Self {
        let mut sizes: Vec<(usize, f64)> = Vec::new();
        for s in mix.shapes() {
            if s.demand.gpu.count() != 1 || !s.demand.allows_model(model) {
                continue;
            }
            let Some(milli) = s.demand.gpu.need_milli(capacity).filter(|&m| m > 0) else {
                continue;
            };
            let milli = milli as usize;
            match sizes.iter_mut().find(|(m, _)| *m == milli) {
                Some(e) => e.1 += s.freq,
                None => sizes.push((milli, s.freq)),
            }
        }
        let sharing: f64 = sizes
            .iter()
            .filter(|(m, _)| *m < 1000)
            .map(|(_, f)| f)
            .sum();
        Self::from_sizes(&sizes, SUPPLY * sharing)
    }

    /// Hole values for `(size in milli, frequency)` pairs with the given
    /// supply frequency.
    pub fn from_sizes(sizes: &[(usize, f64)], supply: f64) -> Self {
        // (size, probability it arrives for a hole), the same for every hole.
        let arrivals: Vec<(usize, f64)> = sizes
            .iter()
            .map(|&(m, f)| {
                (
                    m,
                    if supply > 0.0 {
                        (f / supply).min(1.0)
                    } else {
                        1.0
                    },
                )
            })
            .collect();
        let mut value = vec![0.0; 1001];
        let mut options: Vec<(f64, f64)> = Vec::with_capacity(sizes.len());
        for h in 1..=1000usize {
            options.clear();
            for &(m, arrives) in &arrivals {
                if m <= h {
                    options.push((value[h - m], arrives));
                }
            }
            options.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (mut expected, mut none_yet) = (0.0, 1.0);
            for &(left, arrives) in &options {
                expected += none_yet * arrives * left;
                none_yet *= 1.0 - arrives;
            }
            value[h] = expected + none_yet * h as f64;
        }
        HoleValues { value }
    }

    /// Expected dead room of a hole of `milli` milli-GPUs (clamped to 1000).
    pub fn value(&self, milli: u64) -> f64 {
        self.value[(milli as usize).min(1000)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_module_example() {
        // 470 at 9% (always comes), 160 at 0.6% (comes with 0.4).
        let v = HoleValues::from_sizes(&[(470, 0.09), (160, 0.006)], 0.015);
        assert_eq!(v.value(0), 0.0);
        assert_eq!(v.value(60), 60.0, "nothing fits a 0.06 hole");
        // V(190) = 0.4 * V(30) + 0.6 * 190 = 12 + 114.
        assert!((v.value(190) - 126.0).abs() < 1e-9, "{}", v.value(190));
        // A 470 surely comes for a 530 hole, leaving 60.
        assert!((v.value(530) - 60.0).abs() < 1e-9, "{}", v.value(530));
        // V(210) = 0.4 * V(50) + 0.6 * 210 = 20 + 126.
        assert!((v.value(210) - 146.0).abs() < 1e-9, "{}", v.value(210));
    }

    #[test]
    fn a_hole_two_sizes_fill_exactly_is_worth_nothing() {
        // 650 + 350 = 1000: an idle GPU (or a 350 hole after a 650) fills up.
        let v = HoleValues::from_sizes(&[(650, 0.03), (350, 0.03)], 0.015);
        assert_eq!(v.value(1000), 0.0);
        assert_eq!(v.value(350), 0.0);
        assert_eq!(v.value(340), 340.0);
    }

    #[test]
    fn live_requests_in_memory_are_sized_per_gpu_capacity() {
        use crate::placement::types::{Demand, GpuDemand};
        let demand = |gpu| Demand {
            gpu,
            cpu_milli: 1000,
            ..Demand::default()
        };
        let eight_gb = demand(GpuDemand::Memory {
            count: 1,
            per_gpu: 8192,
        });
        let whole = demand(GpuDemand::Whole { count: 1 });
        let mix = WorkloadMix::from_demands([&eight_gb, &eight_gb, &whole, &whole], 1.0);
        // On a 16 GB GPU 8 GB is 500 milli: two fill it exactly.
        let t4 = HoleValues::build(&mix, "T4", 16384);
        assert_eq!(t4.value(500), 0.0);
        assert_eq!(t4.value(1000), 0.0);
        assert_eq!(t4.value(499), 499.0);
        // On a 24 GB GPU it is ceil(8192 * 1000 / 24576) = 334 milli: a 668
        // hole takes two, a 666 hole one (332 left that nothing fits).
        let a10 = HoleValues::build(&mix, "A10", 24576);
        assert_eq!(a10.value(668), 0.0);
        assert_eq!(a10.value(666), 332.0);
    }

    #[test]
    fn the_best_remainder_is_tried_first() {
        // 300 hole: a 290 (f 0.0075, a = 0.5) would leave 10, a 200 (always)
        // leaves 100. V = 0.5 * 10 + 0.5 * (1 * 100) = 55.
        let v = HoleValues::from_sizes(&[(290, 0.0075), (200, 0.05)], 0.015);
        assert!((v.value(300) - 55.0).abs() < 1e-9, "{}", v.value(300));
    }
}
