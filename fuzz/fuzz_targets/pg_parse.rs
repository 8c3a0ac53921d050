#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| grid_fuzz::pg_parse::run(data));
