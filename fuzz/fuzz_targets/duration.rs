#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| latch::fuzzing::duration_string(data));
