//! The fuzz targets' bodies, one module per target, so that `fuzz_targets/*.rs` stay one
//! line each and the fixtures they share are built once per process. Every target asserts
//! a property against a reference (a batch result, the brute-force oracle, the untouched
//! log), not just the absence of panics.

pub mod audit_verify;
pub mod endpoint_reply;
pub mod fixtures;
pub mod lexer_parser;
pub mod mask_oracle;
#[cfg(feature = "pg")]
pub mod pg_parse;
pub mod reserve_completion;
pub mod returned_text;
#[cfg(test)]
mod seeds;
