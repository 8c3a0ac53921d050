#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| grid_fuzz::endpoint_reply::run(data));
