#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| latch::fuzzing::assertion(data));
