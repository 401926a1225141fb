//! caldera-node
