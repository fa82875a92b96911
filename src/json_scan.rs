//! JSON text read byte by byte without parsing it — strings and their escapes tracked, any
//! depth safe: what the MCP transport measures a message's nesting with before serde_json
//! reads it, and what finds the integer literals serde_json would round
//! (`model::inexact_integer`).

/// What a byte of JSON text is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Byte {
    /// `[` or `{`: the depth given is the one it opens.
    Open,
    /// `]` or `}`: the depth given is the one it closes.
    Close,
    /// A byte of a string, its quotes included: never `Open` or `Close`.
    Quoted,
    /// Anything else outside strings (numbers, literals, `:`, `,`, white space).
    Other,
}

/// Calls `each(byte, kind, depth)` for every byte of a JSON text, in order.
pub fn walk(text: &[u8], mut each: impl FnMut(u8, Byte, usize)) {
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            each(b, Byte::Quoted, depth);
            continue;
        }
        match b {
            b'[' | b'{' => {
                depth += 1;
                each(b, Byte::Open, depth);
            }
            b']' | b'}' => {
                each(b, Byte::Close, depth);
                depth = depth.saturating_sub(1);
            }
            b'"' => {
                in_string = true;
                each(b, Byte::Quoted, depth);
            }
            _ => each(b, Byte::Other, depth),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_their_escapes_are_quoted_bytes() {
        let text = br#"{"a\"[":[1]}"#;
        let mut kinds = Vec::new();
        walk(text, |b, kind, depth| kinds.push((b as char, kind, depth)));
        let quoted: String = kinds
            .iter()
            .filter(|(_, k, _)| *k == Byte::Quoted)
            .map(|(c, _, _)| *c)
            .collect();
        assert_eq!(quoted, r#""a\"[""#);
        let opens: Vec<usize> = kinds
            .iter()
            .filter(|(_, k, _)| *k == Byte::Open)
            .map(|(_, _, d)| *d)
            .collect();
        assert_eq!(opens, [1, 2]);
    }
}
