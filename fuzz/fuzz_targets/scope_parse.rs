//! `Scope::parse` on arbitrary text: never panics; an accepted scope prints back to itself; a
//! rejection is one line without control characters (it goes to a terminal as one sentence).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memscope::Scope;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Scope::parse(text) {
        Ok(scope) => assert_eq!(Scope::parse(&scope.to_string()), Ok(scope)),
        Err(e) => {
            assert!(!e.trim().is_empty());
            assert!(!e.chars().any(char::is_control), "{e:?}");
        }
    }
});
