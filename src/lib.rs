//! The `caldera` package's library target holds nothing: it exists so the
//! package's integration tests can depend on the package itself with the
//! `failpoints` feature (Cargo ignores a dependency on a package without a
//! library), which builds the `caldera` binary they start with the commit
//! fail points in. The binary's code is `src/main.rs` and `src/cli/`.
