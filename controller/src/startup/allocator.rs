//! The allocator's settings that the controller runs with, which mimalloc reads from the
//! environment once, as the process starts (setting them later takes `unsafe` FFI): the image
//! sets them (`Containerfile`, `cargo xtask image`), and so do the harnesses that start the
//! controller or replay its pass.

/// How long (ms) mimalloc keeps the memory that a pass freed before it gives it back to the
/// system (its default: 10 ms, and 100 ms for its arenas). A large fleet's pass takes longer than
/// that and frees most of what it allocated: given back at the default, the next pass took it
/// again page by page (1,700 page faults a pass at 10,000 nodes, a twelfth of its time). At 1 s
/// a pass reuses it; an idle controller still gives it back (docs/decisions/0003-fleet-scale.md).
pub const PURGE_DELAY: (&str, &str) = ("MIMALLOC_PURGE_DELAY", "1000");

/// The settings a process started now should be given: those its parent's environment lacks (an
/// operator's own value is kept).
pub fn missing() -> Vec<(&'static str, &'static str)> {
    [PURGE_DELAY]
        .into_iter()
        .filter(|(key, _)| std::env::var_os(key).is_none())
        .collect()
}
