//! The process: its flags, its HTTP endpoints and the permissions it checks at start-up.

pub mod allocator;
pub(crate) mod args;
pub(crate) mod permissions;
pub(crate) mod process;
pub(crate) mod server;
