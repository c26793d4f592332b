#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reqcost_fuzz::wire(data));
