//! The integration tests of this crate, one binary: each module was a test file of its own,
//! and one binary links the workspace once instead of once per file.

mod validation_table;
