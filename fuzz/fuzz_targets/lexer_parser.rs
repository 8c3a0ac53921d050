#![no_main]

libfuzzer_sys::fuzz_target!(
    init: grid_fuzz::lexer_parser::init(),
    |data: &[u8]| grid_fuzz::lexer_parser::run(data)
);
