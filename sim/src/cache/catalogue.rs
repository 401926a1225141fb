//! The model versions a cache replay serves: `K` versions with sizes drawn
//! uniformly from a range and a Zipf popularity (version `k`, counted from 0,
//! is asked for with probability proportional to `1 / (k + 1)^s`; `s = 0` is
//! uniform). Real serving fleets are skewed — a few versions take most of the
//! traffic — and the skew is what decides how much a cache can hit.
use caldera_scheduling::placement::rng::SplitMix64;
use caldera_scheduling::placement::WeightsNeed;

/// Bytes in the sim's GB (decimal, like the MB/s of its bandwidths).
pub const GB: f64 = 1e9;

/// One version: its weights as placement sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub need: WeightsNeed,
}

/// The versions and their popularity.
#[derive(Debug, Clone)]
pub struct Catalogue {
    versions: Vec<Version>,
    /// Cumulative popularity, ending at 1.
    cdf: Vec<f64>,
}

impl Catalogue {
    /// `k` versions with sizes uniform in `[min_gb, max_gb]` and Zipf skew
    /// `s`, all drawn from `seed`.
    pub fn new(k: u32, min_gb: f64, max_gb: f64, s: f64, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed ^ 0x5EED_CA7A_1060_u64);
        let versions = (0..k)
            .map(|i| {
                let gb = min_gb + (max_gb - min_gb) * rng.unit();
                Version {
                    need: WeightsNeed {
                        model: format!("model-{i}:1"),
                        sha256: format!("{:064x}", i as u64 + 1),
                        size_bytes: (gb * GB).round() as u64,
                    },
                }
            })
            .collect();
        let weights: Vec<f64> = (0..k).map(|i| 1.0 / ((i + 1) as f64).powf(s)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Catalogue { versions, cdf }
    }

    /// Number of versions.
    pub fn len(&self) -> usize {
        self.versions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    /// Version `v`.
    pub fn get(&self, v: usize) -> &Version {
        &self.versions[v]
    }

    /// Size of version `v`, bytes.
    pub fn size(&self, v: usize) -> u64 {
        self.versions[v].need.size_bytes
    }

    /// Probability that a task asks for version `v`.
    pub fn popularity(&self, v: usize) -> f64 {
        let below = if v == 0 { 0.0 } else { self.cdf[v - 1] };
        self.cdf[v] - below
    }

    /// A version drawn by popularity.
    pub fn draw(&self, rng: &mut SplitMix64) -> usize {
        let u = rng.unit();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.versions.len().saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_with_s_zero_is_uniform_and_skews_as_s_grows() {
        let flat = Catalogue::new(8, 1.0, 2.0, 0.0, 1);
        for v in 0..8 {
            assert!((flat.popularity(v) - 0.125).abs() < 1e-12);
        }
        let mut rng = SplitMix64::new(9);
        let mut counts = [0u32; 8];
        for _ in 0..80_000 {
            counts[flat.draw(&mut rng)] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        let skewed = Catalogue::new(8, 1.0, 2.0, 1.2, 1);
        assert!(skewed.popularity(0) > 2.0 * skewed.popularity(1));
        let total: f64 = (0..8).map(|v| skewed.popularity(v)).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn sizes_stay_in_range_and_the_draw_is_seeded() {
        let a = Catalogue::new(16, 4.0, 40.0, 1.0, 7);
        for v in 0..16 {
            let gb = a.size(v) as f64 / GB;
            assert!((4.0..=40.0).contains(&gb), "{gb}");
        }
        let b = Catalogue::new(16, 4.0, 40.0, 1.0, 7);
        assert_eq!(a.versions, b.versions);
    }
}
