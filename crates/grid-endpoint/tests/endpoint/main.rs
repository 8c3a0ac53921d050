//! The integration tests of grid-endpoint, in one binary (one link instead of six).
//! Every server they start binds 127.0.0.1 and serves a bounded number of requests;
//! every test runs under a time bound.

mod common;

mod adversarial;
mod client_errors;
mod direct_mode;
mod gpt2;
mod overlap;
mod prompt;
mod protocol;
mod vllm_backend;
