//! `WriteRequest::from_json_line` on arbitrary input: never panics; a rejection names the
//! problem; an accepted request serializes back to an equal request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memscope::WriteRequest;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    match WriteRequest::from_json_line(&line) {
        Ok(req) => {
            let text = serde_json::to_string(&req).expect("a parsed request serializes");
            assert_eq!(WriteRequest::from_json_line(&text), Ok(req));
        }
        Err(e) => {
            assert!(
                e.message.starts_with("malformed JSON")
                    || e.message.starts_with("invalid write request"),
                "{e:?}"
            );
        }
    }
});
