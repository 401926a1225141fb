//! Chargeback: what each tenant's allocations cost, from the persisted
//! billing records (`b/`) and the price table in config.
pub mod cost;
pub mod csv;
pub mod prices;

pub use cost::{across_tenants, report, CostLine, CostReport, GroupBy};
pub use prices::{GpuPrices, Micros, PriceError, PriceTable};
