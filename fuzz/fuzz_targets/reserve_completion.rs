#![no_main]

libfuzzer_sys::fuzz_target!(
    init: grid_fuzz::reserve_completion::init(),
    |data: &[u8]| grid_fuzz::reserve_completion::run(data)
);
