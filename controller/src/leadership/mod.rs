//! Who may write: the Lease election, the clocks a term is measured on, and the fence every write
//! passes.

pub(crate) mod fence;
pub(crate) mod leader;
pub(crate) mod term_clock;
pub(crate) mod write_params;
