//! Which live policies select each node.

use crate::model::collections::FastMap;

/// The live policies that select each node, by node name, in name order: looked up for every node,
/// never iterated.
pub(crate) type Claims<'v> = FastMap<&'v str, Vec<&'v str>>;
