#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| latch::fuzzing::keycloak_realm(data));
