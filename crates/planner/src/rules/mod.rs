//! The rules that decide, node by node and pod by pod, on the index.

pub(crate) mod admission;
pub(crate) mod calls;
pub(crate) mod deleted;
pub(crate) mod drain;
pub(crate) mod health;
pub(crate) mod node_context;
pub(crate) mod progress;
pub(crate) mod reads;
pub(crate) mod room;
pub(crate) mod surge;
pub(crate) mod window;
