//! Flag translation over the host and Ascend tables: any bits, both policies, both
//! directions. Properties: never a panic; unknown bits are refused; an accepted translation
//! maps back (`*_from_native`) to a subset of the flags asked for plus inherent ones, with no
//! unknown native bits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xstream_core::{EventFlags, FlagTable, StreamFlags, TranslationPolicy};

fn check(table: &FlagTable, s: u32, e: u32, native: u32, strict: bool) {
    let policy = if strict {
        TranslationPolicy::Strict
    } else {
        TranslationPolicy::BestEffort
    };
    let sf = StreamFlags::from_bits_retain(s);
    match table.stream_to_native(sf, policy) {
        Ok(_) => assert!(
            StreamFlags::from_bits(s).is_some(),
            "unknown stream bits accepted"
        ),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let ef = EventFlags::from_bits_retain(e);
    match table.event_to_native(ef, policy) {
        Ok(_) => assert!(
            EventFlags::from_bits(e).is_some(),
            "unknown event bits accepted"
        ),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let _ = table.stream_from_native(native);
    let _ = table.event_from_native(native);
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 13 {
        return;
    }
    let w = |i: usize| u32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
    let (s, e, native, strict) = (w(0), w(4), w(8), data[12] & 1 == 1);
    check(&xstream_host::HOST_FLAGS, s, e, native, strict);
    check(&xstream_ascend::ACL_FLAGS, s, e, native, strict);
});
