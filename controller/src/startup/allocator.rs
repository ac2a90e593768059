//! The allocator's settings that the controller runs with, which mimalloc reads from the
//! environment once, as the process starts (setting them later takes `unsafe` FFI): the image
//! sets them (`Containerfile`, `cargo xtask image`), and so do the harnesses that start the
//! controller or replay its pass.

/// How long (ms) mimalloc keeps the memory that a pass freed before it gives it back to the
/// system: a large fleet's pass outlasts its default and frees most of what it allocated, which
/// the next pass then faulted in again page by page; an idle controller still gives it back
/// (figures: docs/decisions/0003-fleet-scale.md).
pub const PURGE_DELAY: (&str, &str) = ("MIMALLOC_PURGE_DELAY", "1000");

/// The settings a process started now should be given: those its parent's environment lacks (an
/// operator's own value is kept).
pub fn missing() -> Vec<(&'static str, &'static str)> {
    [PURGE_DELAY]
        .into_iter()
        .filter(|(key, _)| std::env::var_os(key).is_none())
        .collect()
}
