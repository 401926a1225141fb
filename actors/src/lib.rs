//! caldera-actors
