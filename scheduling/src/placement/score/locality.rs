//! The locality term: what a task needs on its node that the node already
//! holds — its model weights and its image — as a share of the bound.
//!
//! score = policy score + bound * bytes already there / bytes needed
//!
//! where the bytes needed are the weights' size plus the image's, and the
//! bytes already there count the weights in full when verified, half when
//! still being fetched (see [`super::weights::WARMING_SHARE`]), and the
//! image in full when the node holds it. Why bytes: what locality saves is
//! the transfer, and a 40 GB model on a node without its 2 GB image is most
//! of the saving; a 10 GB image without 1 GB of weights is most of it too.
//!
//! A demand with weights and no image scores exactly as
//! [`super::weights::bonus`] (so every figure measured with the weights term
//! alone is unchanged); one with an image and no weights earns the whole
//! bound where the image is. Worked example, bound 0.3, weights 20 GB,
//! image 10 GB (30 GB needed):
//! - weights verified, image absent: 0.3 * 20 / 30 = 0.2
//! - weights absent, image there: 0.3 * 10 / 30 = 0.1
//! - weights warming, image there: 0.3 * (10 + 10) / 30 = 0.2
//! - both there: 0.3
use super::weights::{self, Holding};
use crate::placement::types::{ImageNeed, NodeImages};

/// Plugin name.
pub const NAME: &str = "ImageAndWeightsLocal";

/// Whether `images` holds `need`.
pub fn holds_image(images: &NodeImages, need: &ImageNeed) -> bool {
    images.held.contains_key(&need.image)
}

/// The bonus for a node holding `weights` (the demand's weights and what
/// the node holds of them) and `image` (its size and whether it is there),
/// at most `bound`. See the module comment.
pub fn bonus(weights: Option<(Holding, u64)>, image: Option<(bool, u64)>, bound: f64) -> f64 {
    match (weights, image) {
        (None, None) => 0.0,
        (Some((holding, _)), None) => weights::bonus(holding, bound),
        (None, Some((there, _))) => {
            if there {
                bound
            } else {
                0.0
            }
        }
        (Some((holding, w_bytes)), Some((there, i_bytes))) => {
            let needed = w_bytes as f64 + i_bytes as f64;
            if needed <= 0.0 {
                return weights::bonus(holding, bound);
            }
            let w_there = match holding {
                Holding::Cached => w_bytes as f64,
                Holding::Warming => w_bytes as f64 * weights::WARMING_SHARE,
                Holding::Absent => 0.0,
            };
            let i_there = if there { i_bytes as f64 } else { 0.0 };
            bound * (w_there + i_there) / needed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    #[test]
    fn both_count_by_the_bytes_they_save() {
        // (weights: holding and size, image: there and size, expected), bound 0.3.
        type Row = (Option<(Holding, u64)>, Option<(bool, u64)>, f64);
        let rows: [Row; 10] = [
            // Nothing needed: nothing earned.
            (None, None, 0.0),
            // Weights alone: as the weights term always scored.
            (Some((Holding::Cached, 20 * GB)), None, 0.3),
            (Some((Holding::Warming, 20 * GB)), None, 0.15),
            (Some((Holding::Absent, 20 * GB)), None, 0.0),
            // Image alone: the whole bound where it is.
            (None, Some((true, 10 * GB)), 0.3),
            (None, Some((false, 10 * GB)), 0.0),
            // 20 GB weights + 10 GB image = 30 GB needed:
            // weights there: 0.3 * 20/30 = 0.2
            (
                Some((Holding::Cached, 20 * GB)),
                Some((false, 10 * GB)),
                0.2,
            ),
            // image there: 0.3 * 10/30 = 0.1
            (Some((Holding::Absent, 20 * GB)), Some((true, 10 * GB)), 0.1),
            // weights warming (half of 20) and image: 0.3 * (10 + 10)/30 = 0.2
            (
                Some((Holding::Warming, 20 * GB)),
                Some((true, 10 * GB)),
                0.2,
            ),
            // both: 0.3 * 30/30
            (Some((Holding::Cached, 20 * GB)), Some((true, 10 * GB)), 0.3),
        ];
        for (w, i, want) in rows {
            let got = bonus(w, i, 0.3);
            assert!((got - want).abs() < 1e-12, "{w:?} {i:?}: {got} != {want}");
        }
    }

    #[test]
    fn weights_of_unknown_size_score_as_the_weights_term_alone() {
        // A 0-byte need (sizes not known) falls back to the holding.
        assert_eq!(
            bonus(Some((Holding::Cached, 0)), Some((false, 0)), 0.3),
            0.3
        );
    }

    #[test]
    fn an_image_is_held_by_its_name() {
        let mut images = NodeImages::default();
        let need = ImageNeed {
            image: "registry.internal/a:1".into(),
            size_bytes: 5,
        };
        assert!(!holds_image(&images, &need));
        images.held.insert("registry.internal/a:1".into(), 5);
        assert!(holds_image(&images, &need));
    }
}
