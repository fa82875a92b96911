//! Copying to the system clipboard through the terminal: OSC 52 (`ESC ] 52 ; c ; base64 BEL`).
//! It works wherever the terminal does — over ssh, and inside tmux with `set-clipboard on` —
//! with no clipboard daemon. The text travels base64-encoded, so a stored value can never
//! reach the terminal as control characters.

use serde_json::Value;

/// The largest text copied. Terminals cap OSC 52 payloads (xterm's default is far below a
/// megabyte) and drop larger ones silently; refusing says so instead.
pub const COPY_LIMIT: usize = 100_000;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 (RFC 4648, with padding). A dozen lines do not warrant a dependency.
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The escape sequence that puts `text` on the clipboard, or why it is not sent.
pub fn osc52(text: &str) -> Result<Vec<u8>, String> {
    if text.len() > COPY_LIMIT {
        return Err(format!(
            "not copied: {} bytes is more than the clipboard limit of {} (memscope history --json prints it whole)",
            super::text::thousands(text.len() as i64),
            super::text::thousands(COPY_LIMIT as i64)
        ));
    }
    let mut out = b"\x1b]52;c;".to_vec();
    out.extend_from_slice(base64(text.as_bytes()).as_bytes());
    out.push(0x07);
    Ok(out)
}

/// A value as it is stored: a string's own text, anything else as its JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
        assert_eq!(base64("中".as_bytes()), "5Lit");
    }

    #[test]
    fn wraps_the_text_in_osc_52_and_refuses_a_huge_one() {
        let out = osc52("foo\n\x1b[2J").expect("a small text");
        assert_eq!(out, b"\x1b]52;c;Zm9vChtbMko=\x07");
        // Only the framing is escape bytes: the payload is printable.
        assert!(out[7..out.len() - 1].iter().all(|b| b.is_ascii_graphic()));
        assert!(osc52(&"x".repeat(COPY_LIMIT)).is_ok());
        let err = osc52(&"x".repeat(COPY_LIMIT + 1)).expect_err("too large");
        assert!(err.contains("100,001 bytes"), "{err}");
    }
}
