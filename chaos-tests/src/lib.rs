//! caldera-chaos-tests
