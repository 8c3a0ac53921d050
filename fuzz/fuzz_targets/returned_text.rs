#![no_main]

libfuzzer_sys::fuzz_target!(
    init: grid_fuzz::returned_text::init(),
    |data: &[u8]| grid_fuzz::returned_text::run(data)
);
