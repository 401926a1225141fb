//! caldera-spec
