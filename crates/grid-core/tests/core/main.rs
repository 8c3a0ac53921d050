//! The integration tests of grid-core, in one binary (one link instead of fifteen). The
//! counting allocator of `tests/warm_alloc.rs` would count every test's allocations, so
//! that test keeps a binary of its own.

mod common;

mod audit;
mod bare;
mod cache;
mod cache_registry;
mod catalog;
mod checker;
mod checker_spider;
mod decline;
mod decode;
mod dynamic;
mod grammar;
mod hidden;
mod masks;
mod mini;
mod modules;
mod mutations;
mod one_meaning;
mod prompt;
mod qualified;
mod reduced;
mod reserve_completion;
mod runs;
mod spider;
mod viability;
