#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| latch::fuzzing::token_form(data));
