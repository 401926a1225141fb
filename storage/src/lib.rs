//! caldera-storage
