//! The price table (config keys `price-*`): what one hour of each resource
//! costs, in integer micro-units of the currency, so that no report ever
//! carries binary floating-point drift.
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;

/// An amount of currency in micro-units (`1_000_000` is one unit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Micros(pub u64);

/// Why a configured price was refused; the words name the text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// Not digits with at most one decimal point.
    #[error("{0:?} is not a price (write it like 2.40)")]
    NotAPrice(String),
    /// Finer than a micro-unit.
    #[error("{0:?} has more than 6 decimals")]
    TooManyDecimals(String),
    /// Over a million units an hour (or past what a u64 holds).
    #[error("{0:?} is more than 1000000 an hour")]
    TooHigh(String),
    /// A whole part too long to read as a number at all.
    #[error("{0:?} is too large")]
    TooLarge(String),
    /// A GPU price list entry without its `=`.
    #[error("{0:?} is not MODEL=PRICE (e.g. A100=2.40)")]
    NotModelPrice(String),
}

/// The most one price may be: a million units an hour.
const MAX_PRICE: u64 = 1_000_000 * 1_000_000;

impl Micros {
    /// `"2.4"`, `"0.000001"`, `"3"`: at most six decimals, not negative.
    pub fn parse(s: &str) -> Result<Micros, PriceError> {
        let s = s.trim();
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() && frac.is_empty() || !digits(whole) || !digits(frac) {
            return Err(PriceError::NotAPrice(s.to_string()));
        }
        if frac.len() > 6 {
            return Err(PriceError::TooManyDecimals(s.to_string()));
        }
        let w: u64 = if whole.is_empty() {
            0
        } else {
            whole
                .parse()
                .map_err(|_| PriceError::TooLarge(s.to_string()))?
        };
        let f: u64 = format!("{frac:0<6}").parse().unwrap_or(0);
        match w.checked_mul(1_000_000).and_then(|x| x.checked_add(f)) {
            Some(m) if m <= MAX_PRICE => Ok(Micros(m)),
            _ => Err(PriceError::TooHigh(s.to_string())),
        }
    }

    /// `12.345678`: always six decimals, the exact amount.
    pub fn decimal(self) -> String {
        format!("{}.{:06}", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

impl Serialize for Micros {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.decimal())
    }
}

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Micros;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a price such as 2.40 (a number or a string, at most 6 decimals)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Micros, E> {
                Micros::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Micros, E> {
                Micros::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Micros, E> {
                Micros::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Micros, E> {
                // TOML's 2.4 is the f64 nearest 2.4: its shortest decimal form
                // is "2.4" again, so the price is the one written.
                if !v.is_finite() || v < 0.0 {
                    return Err(E::custom(format!("{v} is not a price")));
                }
                Micros::parse(&v.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Price of one GPU-hour by GPU model. A model is priced by the entry that
/// names it the way a request names a model (`A100` names `NVIDIA
/// A100-SXM4-80GB`, `A100-80GB` only the 80 GB ones; the longest such name
/// wins), else by `default`, else 0. Written in TOML as a table
/// (`[chargeback] price-gpu-hour = { default = "1.00", A100 = "2.40" }`) or, for the
/// environment, as `default=1.00,A100=2.40`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuPrices(pub BTreeMap<String, Micros>);

impl GpuPrices {
    /// What one hour of a whole GPU of `model` costs.
    pub fn of(&self, model: &str) -> Micros {
        self.0
            .iter()
            .filter(|(k, _)| *k != "default")
            .filter(|(k, _)| {
                k.eq_ignore_ascii_case(model) || caldera_spec::gpu_model::matches(k, model)
            })
            .max_by_key(|(k, _)| k.len())
            .or_else(|| self.0.get_key_value("default"))
            .map_or(Micros(0), |(_, p)| *p)
    }

    fn parse_list(s: &str) -> Result<GpuPrices, PriceError> {
        let mut out = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (model, price) = part
                .split_once('=')
                .ok_or_else(|| PriceError::NotModelPrice(part.to_string()))?;
            out.insert(model.trim().to_string(), Micros::parse(price)?);
        }
        Ok(GpuPrices(out))
    }
}

impl Serialize for GpuPrices {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for GpuPrices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Table(BTreeMap<String, Micros>),
            List(String),
        }
        match Form::deserialize(d)? {
            Form::Table(t) => Ok(GpuPrices(t)),
            Form::List(s) => GpuPrices::parse_list(&s).map_err(de::Error::custom),
        }
    }
}

/// Everything one cost report needs of the config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PriceTable {
    pub gpu_hour: GpuPrices,
    pub cpu_core_hour: Micros,
    pub memory_gb_hour: Micros,
    pub disk_gb_hour: Micros,
    pub currency: String,
}

impl PriceTable {
    pub fn from_config(c: &crate::config::ServerConfig) -> PriceTable {
        PriceTable {
            gpu_hour: c.chargeback.price_gpu_hour.clone(),
            cpu_core_hour: c.chargeback.price_cpu_core_hour,
            memory_gb_hour: c.chargeback.price_memory_gb_hour,
            disk_gb_hour: c.chargeback.price_disk_gb_hour,
            currency: c.chargeback.price_currency.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_exactly_and_refuse_what_is_not_one() {
        assert_eq!(Micros::parse("2.4"), Ok(Micros(2_400_000)));
        assert_eq!(Micros::parse("0.000001"), Ok(Micros(1)));
        assert_eq!(Micros::parse("3"), Ok(Micros(3_000_000)));
        assert_eq!(Micros::parse(".5"), Ok(Micros(500_000)));
        for bad in ["", "-1", "1.2345678", "abc", "1e3", "2000000"] {
            assert!(Micros::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Micros(12_345_678).decimal(), "12.345678");
        // A TOML float is the price written, not its binary neighbour.
        let m: Micros = serde_json::from_str("0.1").unwrap_or_default();
        assert_eq!(m, Micros(100_000));
    }

    #[test]
    fn a_gpu_model_is_priced_by_the_longest_name_that_names_it_else_default() {
        let p = GpuPrices::parse_list("default=1, A100=2.40, A100-80GB=3.00").unwrap_or_default();
        assert_eq!(p.of("NVIDIA A100-SXM4-40GB"), Micros(2_400_000));
        assert_eq!(p.of("A100-80GB"), Micros(3_000_000));
        assert_eq!(p.of("T4-16GB"), Micros(1_000_000));
        assert_eq!(GpuPrices::default().of("T4"), Micros(0));
        assert!(GpuPrices::parse_list("A100").is_err());
        let t: GpuPrices =
            serde_json::from_str(r#"{"default":"0.5","T4":0.35}"#).unwrap_or_default();
        assert_eq!(t.of("T4-16GB"), Micros(350_000));
    }

    /// Each kind of bad price is its own variant, and says what was written
    /// in the words an operator reads at startup.
    #[test]
    fn a_refused_price_names_its_kind_and_the_text_as_written() {
        let cases = [
            ("abc", "\"abc\" is not a price (write it like 2.40)"),
            ("1.2345678", "\"1.2345678\" has more than 6 decimals"),
            ("2000000", "\"2000000\" is more than 1000000 an hour"),
            (
                "99999999999999999999999",
                "\"99999999999999999999999\" is too large",
            ),
        ];
        for (text, words) in cases {
            match Micros::parse(text) {
                Err(e) => assert_eq!(e.to_string(), words),
                Ok(m) => panic!("{text:?} parsed as {m:?}"),
            }
        }
        assert_eq!(
            GpuPrices::parse_list("A100"),
            Err(PriceError::NotModelPrice("A100".into()))
        );
        assert_eq!(
            GpuPrices::parse_list("A100=x"),
            Err(PriceError::NotAPrice("x".into()))
        );
    }
}
