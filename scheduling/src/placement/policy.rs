//! Names of the placement policies (score plugins) a `Placer` can run.
use std::fmt;
use std::str::FromStr;

/// A placement policy; `Caldera` is the default of the live scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum PolicyName {
    /// Uniformly random feasible node.
    Random,
    /// Tetris dot product of remaining and requested (CPU, GPU).
    DotProd,
    /// Least remaining CPU and GPU.
    BestFit,
    /// Partly used GPUs, then used nodes, then empty nodes.
    GpuPacking,
    /// Nodes running the same kind of task.
    GpuClustering,
    /// Fragmentation gradient descent (ATC'23).
    Fgd,
    /// Caldera's own fragmentation-aware policy.
    #[default]
    Caldera,
}

impl PolicyName {
    /// Every policy, baselines first.
    pub const ALL: [PolicyName; 7] = [
        PolicyName::Random,
        PolicyName::DotProd,
        PolicyName::GpuClustering,
        PolicyName::GpuPacking,
        PolicyName::BestFit,
        PolicyName::Fgd,
        PolicyName::Caldera,
    ];

    /// The CLI / config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Random => "random",
            PolicyName::DotProd => "dotprod",
            PolicyName::BestFit => "bestfit",
            PolicyName::GpuPacking => "gpupacking",
            PolicyName::GpuClustering => "gpuclustering",
            PolicyName::Fgd => "fgd",
            PolicyName::Caldera => "caldera",
        }
    }

    /// Whether the policy measures fragmentation (needs per-class frag tables).
    pub fn uses_fragmentation(self) -> bool {
        matches!(self, PolicyName::Fgd | PolicyName::Caldera)
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown policy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy `{0}` (expected one of random, dotprod, bestfit, gpupacking, gpuclustering, fgd, caldera)")]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyName {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyName::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in PolicyName::ALL {
            assert_eq!(p.to_string().parse::<PolicyName>(), Ok(p));
        }
        assert!("tetris".parse::<PolicyName>().is_err());
    }
}
