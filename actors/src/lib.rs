//! caldera-actors
pub mod config;
