//! caldera-gateway
