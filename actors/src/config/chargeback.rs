//! `[chargeback]`: what the cluster's resources cost and how long the
//! billing records are kept. Prices are decimals with at most 6 places,
//! kept as integer micro-units.
use super::key::section;
use super::ConfigError;
use crate::chargeback::{GpuPrices, Micros};

section! {
    /// Prices and billing retention.
    pub struct ChargebackSection = "chargeback" {
        /// Price of one GPU-hour by GPU model, a table (`{ default = "1.00",
        /// A100 = "2.40" }`; in the environment `default=1.00,A100=2.40`). A
        /// model is priced by the longest entry that names it as a request
        /// would, else `default`. A slice pays its fraction.
        price_gpu_hour: GpuPrices = GpuPrices([("default".to_string(), Micros(0))].into()), was "price-gpu-hour";
        /// Price of one CPU core-hour.
        price_cpu_core_hour: Micros = Micros(0), was "price-cpu-core-hour";
        /// Price of one GB-hour of memory (GB = 1024 MiB).
        price_memory_gb_hour: Micros = Micros(0), was "price-memory-gb-hour";
        /// Price of one GB-hour of disk.
        price_disk_gb_hour: Micros = Micros(0), was "price-disk-gb-hour";
        /// The currency the prices are in, a label only.
        price_currency: String = "USD".into(), was "price-currency";
        /// Billing records of freed allocations older than this are deleted, days.
        billing_retention_days: u64 = 400, was "billing-retention-days";
    }
}

impl ChargebackSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.billing_retention_days == 0 {
            return Err(ConfigError::new(
                "chargeback.billing-retention-days",
                "must be greater than 0",
            ));
        }
        Ok(())
    }
}
