//! `normalize_predicate` on arbitrary text: never panics, and what it returns is a fixed point
//! (`check` verifies invariant 6 by re-normalizing stored predicates).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memscope::normalize_predicate;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match normalize_predicate(text) {
        Ok(p) => {
            assert!(!p.is_empty());
            assert_eq!(normalize_predicate(&p).as_ref(), Ok(&p), "input {text:?}");
        }
        Err(e) => assert!(!e.trim().is_empty()),
    }
});
