//! caldera-actors
pub mod config;
pub mod placement;
