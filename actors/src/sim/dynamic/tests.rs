//! Deterministic replay of a slice of the trace.
