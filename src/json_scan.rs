//! JSON text read byte by byte without parsing it — strings and their escapes tracked, any
//! depth safe: what the MCP transport and `apply` measure a message's or line's nesting with
//! before serde_json reads it past its own recursion limit, and what finds the integer literals serde_json would round
//! (`model::inexact_number`).

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

/// The deepest nesting of arrays and objects in a JSON text (strings skipped).
pub fn nesting(text: &[u8]) -> usize {
    let mut deepest = 0;
    walk(text, |_, kind, depth| {
        if kind == Byte::Open {
            deepest = deepest.max(depth);
        }
    });
    deepest
}

/// Calls `each(byte, kind, depth)` for every byte of a JSON text, in order.
pub fn walk(text: &[u8], each: impl FnMut(u8, Byte, usize)) {
    Walker::default().feed(text, each);
}

/// [`walk`] over a text that arrives in pieces: the depth and whether a string is open carry
/// from one piece to the next (the MCP transport reads a line too long to keep this way).
#[derive(Debug, Default)]
pub struct Walker {
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl Walker {
    /// Calls `each(byte, kind, depth)` for every byte of the next piece, in order.
    pub fn feed(&mut self, text: &[u8], mut each: impl FnMut(u8, Byte, usize)) {
        for &b in text {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                each(b, Byte::Quoted, self.depth);
                continue;
            }
            match b {
                b'[' | b'{' => {
                    self.depth += 1;
                    each(b, Byte::Open, self.depth);
                }
                b']' | b'}' => {
                    each(b, Byte::Close, self.depth);
                    self.depth = self.depth.saturating_sub(1);
                }
                b'"' => {
                    self.in_string = true;
                    each(b, Byte::Quoted, self.depth);
                }
                _ => each(b, Byte::Other, self.depth),
            }
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

    #[test]
    fn a_text_fed_in_pieces_walks_as_a_whole() {
        let text = br#"{"a\"[":[1,{"b":"]\\"}],"c":2}"#;
        let mut whole = Vec::new();
        walk(text, |b, kind, depth| whole.push((b, kind, depth)));
        for cut in 0..text.len() {
            let mut pieces = Vec::new();
            let mut w = Walker::default();
            w.feed(&text[..cut], |b, kind, depth| pieces.push((b, kind, depth)));
            w.feed(&text[cut..], |b, kind, depth| pieces.push((b, kind, depth)));
            assert_eq!(pieces, whole, "cut at {cut}");
        }
    }
}
