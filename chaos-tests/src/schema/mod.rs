//! Requests from an OpenAPI 3.1 document and checks of the answers against
//! it, for the schema-driven fuzz test (`tests/it/api_fuzz.rs`): a seeded
//! generator of valid and broken values ([`gen`]), a validator of the JSON
//! Schema subset the document uses ([`check`]), and the seeded RNG both
//! share ([`Rng`]). No crate of Caldera's is linked: the document is read
//! from the live server, as a generated client would read it.
pub mod check;
pub mod gen;

use serde_json::Value;

/// SplitMix64: small, fast, and the same sequence for the same seed on
/// every machine, so a failing case is replayed by its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// `schema` with its `$ref` (`#/components/schemas/X`) followed, repeatedly.
pub fn resolve<'a>(doc: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..16 {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap_or_default();
                schema = &doc["components"]["schemas"][name];
            }
            None => break,
        }
    }
    schema
}

/// The JSON types a schema allows (`type` may be a string or a list).
pub fn types(schema: &Value) -> Vec<&str> {
    match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}
