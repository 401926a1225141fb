//! The one GPU model matcher. Placement filters, model quotas
//! (`gpus_by_model`), pending reasons and the simulator all ask [`matches`],
//! so "which GPUs does `A10` name" has one answer everywhere.
//!
//! A name is normalised to tokens: lower case, split at `-`, `_` and spaces,
//! the vendor words `NVIDIA`, `Tesla` and `GeForce` dropped. A wanted name
//! matches a GPU's model when every one of its tokens is a whole token of the
//! model: `A100` matches `NVIDIA A100-SXM4-80GB` and `A100-80GB`, `A100-80GB`
//! matches only the 80 GB A100s, and `A10` never matches `A100` or `A10G`.

/// Words that say who made the GPU, not which GPU it is.
const VENDOR_WORDS: &[&str] = &["nvidia", "tesla", "geforce"];

/// The tokens of a model name: `"NVIDIA A100-SXM4-80GB"` → `["a100", "sxm4", "80gb"]`.
pub fn tokens(name: &str) -> Vec<String> {
    name.split(['-', '_', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase)
        .filter(|t| !VENDOR_WORDS.contains(&t.as_str()))
        .collect()
}

/// Whether `wanted` (one name, or alternatives `A|B`) names the GPU model
/// `model`. An alternative with no tokens (empty, or only a vendor word) names
/// nothing; validation refuses such a request.
pub fn matches(wanted: &str, model: &str) -> bool {
    let have = tokens(model);
    wanted.split('|').any(|alt| {
        let want = tokens(alt);
        !want.is_empty() && want.iter().all(|t| have.contains(t))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model strings NVML reports (and the short names people write).
    const A100_SXM4_40: &str = "NVIDIA A100-SXM4-40GB";
    const A100_SXM4_80: &str = "NVIDIA A100-SXM4-80GB";
    const A100_PCIE_40: &str = "NVIDIA A100-PCIE-40GB";
    const A100_PCIE_80: &str = "NVIDIA A100 80GB PCIe";
    const H100_SXM: &str = "NVIDIA H100 80GB HBM3";
    const H100_PCIE: &str = "NVIDIA H100 PCIe";
    const H100_NVL: &str = "NVIDIA H100 NVL";
    const H200: &str = "NVIDIA H200";
    const L40S: &str = "NVIDIA L40S";
    const L4: &str = "NVIDIA L4";
    const A10: &str = "NVIDIA A10";
    const A10G: &str = "NVIDIA A10G";
    const T4: &str = "Tesla T4";
    const V100: &str = "Tesla V100-SXM2-32GB";
    const RTX_4090: &str = "NVIDIA GeForce RTX 4090";

    const ALL: &[&str] = &[
        A100_SXM4_40,
        A100_SXM4_80,
        A100_PCIE_40,
        A100_PCIE_80,
        H100_SXM,
        H100_PCIE,
        H100_NVL,
        H200,
        L40S,
        L4,
        A10,
        A10G,
        T4,
        V100,
        RTX_4090,
    ];

    #[test]
    fn each_wanted_name_matches_exactly_these_gpus() {
        let table: &[(&str, &[&str])] = &[
            (
                "A100",
                &[A100_SXM4_40, A100_SXM4_80, A100_PCIE_40, A100_PCIE_80],
            ),
            (
                "a100",
                &[A100_SXM4_40, A100_SXM4_80, A100_PCIE_40, A100_PCIE_80],
            ),
            (
                "NVIDIA A100",
                &[A100_SXM4_40, A100_SXM4_80, A100_PCIE_40, A100_PCIE_80],
            ),
            ("A100-80GB", &[A100_SXM4_80, A100_PCIE_80]),
            ("a100_80gb", &[A100_SXM4_80, A100_PCIE_80]),
            ("A100-40GB", &[A100_SXM4_40, A100_PCIE_40]),
            ("A100-SXM4", &[A100_SXM4_40, A100_SXM4_80]),
            ("A100 PCIe", &[A100_PCIE_40, A100_PCIE_80]),
            ("NVIDIA A100-SXM4-80GB", &[A100_SXM4_80]),
            ("H100", &[H100_SXM, H100_PCIE, H100_NVL]),
            ("H100 NVL", &[H100_NVL]),
            ("H100-PCIe", &[H100_PCIE]),
            ("H200", &[H200]),
            ("L40S", &[L40S]),
            ("L4", &[L4]),
            ("A10", &[A10]),
            ("A10G", &[A10G]),
            ("T4", &[T4]),
            ("Tesla T4", &[T4]),
            ("V100", &[V100]),
            ("V100-32GB", &[V100]),
            ("RTX 4090", &[RTX_4090]),
            ("4090", &[RTX_4090]),
            ("A10|T4", &[A10, T4]),
            ("NVIDIA", &[]),
            ("", &[]),
            ("B200", &[]),
        ];
        for (wanted, expected) in table {
            let got: Vec<&str> = ALL.iter().copied().filter(|m| matches(wanted, m)).collect();
            assert_eq!(&got, expected, "{wanted:?}");
        }
    }

    #[test]
    fn short_names_match_themselves_whole() {
        // The simulated GPUs (`--simulate-gpus 8xA100-80GB` names them "A100")
        // and the Alibaba trace's models ("V100M16", "G2") are exact names.
        assert!(matches("A100", "A100"));
        assert!(matches("a100", "A100"));
        assert!(!matches("A10", "A100"));
        assert!(!matches("A100", "A10"));
        assert!(matches("A100", "A100-80GB"));
        assert!(matches("A100-80GB", "A100-80GB"));
        assert!(!matches("A100-80GB", "A100-40GB"));
        assert!(matches("V100M16|V100M32", "V100M32"));
        assert!(!matches("V100M16", "V100M32"));
        assert!(!matches("G2", "G3"));
        assert!(matches("T4", "T4"));
    }

    #[test]
    fn tokens_drop_vendor_words_case_and_separators() {
        assert_eq!(tokens("NVIDIA A100-SXM4-80GB"), ["a100", "sxm4", "80gb"]);
        assert_eq!(tokens("NVIDIA GeForce RTX 4090"), ["rtx", "4090"]);
        assert_eq!(tokens("Tesla  V100_SXM2"), ["v100", "sxm2"]);
    }
}
