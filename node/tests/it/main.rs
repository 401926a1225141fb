//! The integration tests of this crate, one binary: each module was a test file of its own,
//! and one binary links the workspace once instead of once per file.

mod common;
mod containers;
mod device_program;
mod readiness;
mod runtime;
mod session;
mod swap;
mod weights;
