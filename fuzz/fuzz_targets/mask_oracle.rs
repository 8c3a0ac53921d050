#![no_main]

libfuzzer_sys::fuzz_target!(
    init: grid_fuzz::mask_oracle::init(),
    |data: &[u8]| grid_fuzz::mask_oracle::run(data)
);
