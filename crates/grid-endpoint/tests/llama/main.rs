//! Real-model tests of the llama backend (feature `llama`), through the protocol on
//! loopback. They need a GGUF: `GRID_TEST_MODEL=$(scripts/model.sh qwen2.5-coder-0.5b)`;
//! without it every test prints SKIPPED and passes. Inference runs on one thread.

mod common;

mod exact;
mod numerics;
mod prompt;
mod state;
