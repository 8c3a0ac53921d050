//! L1 and L2: the dialect grammar, its lexeme spec, and role projections of it.

pub mod cfg;
pub mod dialect;
pub mod projection;
pub mod spec;
pub mod table;
pub mod template;

pub use dialect::{Dialect, Terminals};
pub use projection::project;
