//! A long value as the screens list it (README, "The terminal UI"): each backend reads only the
//! first characters of the stored JSON text and the whole's size; this turns those characters
//! into the value a screen draws, the same on both backends.

use serde_json::Value;

/// The value a preview shows, from the first characters of a stored value's JSON text: a
/// string as its own characters, decoded as far as the cut allows (an escape or a surrogate
/// pair the cut split is dropped), so a long value reads as a short one does; an object, an
/// array or a number as its JSON text.
pub(crate) fn preview_value(cut: &str) -> Value {
    let body = cut.trim_start_matches([' ', '\t', '\n', '\r']);
    match body.strip_prefix('"') {
        Some(string) => Value::String(decoded_prefix(string)),
        None => Value::String(cut.to_string()),
    }
}

/// The characters of a JSON string whose opening quote is gone, up to its closing quote or the
/// end of the text, whichever comes first. Never fails: stored JSON is valid, and what is not
/// (a cut, or an escape no writer makes) becomes nothing or `U+FFFD`.
fn decoded_prefix(mut s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    loop {
        let Some(at) = s.find(['"', '\\']) else {
            out.push_str(s);
            return out;
        };
        out.push_str(&s[..at]);
        if s.as_bytes()[at] == b'"' {
            return out;
        }
        s = &s[at + 1..];
        let Some(e) = s.chars().next() else {
            return out;
        };
        s = &s[e.len_utf8()..];
        let c = match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'u' => match unicode_escape(&mut s) {
                Some(c) => c,
                None => return out,
            },
            // `"`, `\`, `/` stand for themselves.
            other => other,
        };
        out.push(c);
    }
}

/// The character of a `\u` escape whose four hex digits start `s` (a surrogate pair takes the
/// second escape too), `s` moved past it; `None` when the text ends inside it.
fn unicode_escape(s: &mut &str) -> Option<char> {
    let (high, len) = hex4(s)?;
    *s = &s[len..];
    if !(0xD800..0xDC00).contains(&high) {
        return Some(char::from_u32(high).unwrap_or(char::REPLACEMENT_CHARACTER));
    }
    let Some(tail) = s.strip_prefix("\\u") else {
        // The text ends before the pair's second half (or within its `\u`): dropped.
        if "\\u".starts_with(*s) {
            return None;
        }
        return Some(char::REPLACEMENT_CHARACTER);
    };
    let (low, len) = hex4(tail)?;
    if !(0xDC00..0xE000).contains(&low) {
        return Some(char::REPLACEMENT_CHARACTER);
    }
    *s = &tail[len..];
    char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        .or(Some(char::REPLACEMENT_CHARACTER))
}

/// The number the four hex digits at the start of `s` spell and the bytes they take; `None`
/// when `s` ends before four characters. A character that is not a hex digit spells `U+FFFD`.
fn hex4(s: &str) -> Option<(u32, usize)> {
    let len = match s.char_indices().nth(3) {
        Some((i, c)) => i + c.len_utf8(),
        None => return None,
    };
    let n = u32::from_str_radix(&s[..len], 16).unwrap_or(0xFFFD);
    Some((n, len))
}

#[cfg(test)]
mod tests {
    use super::preview_value;
    use serde_json::Value;

    fn shown(cut: &str) -> String {
        match preview_value(cut) {
            Value::String(s) => s,
            other => panic!("a preview is a string: {other}"),
        }
    }

    #[test]
    fn a_string_reads_as_its_characters() {
        let value = "A\nB \"q\" \u{1b}[31m \u{202e} \\ 仓库 🧠 \t/";
        let text = serde_json::to_string(value).unwrap();
        assert_eq!(shown(&text), value);
        // Cut anywhere, it is the start of the same characters.
        for end in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            let got = shown(&text[..end]);
            assert!(value.starts_with(&got), "{end}: {got:?}");
        }
    }

    #[test]
    fn an_escape_or_a_pair_cut_at_the_end_is_dropped() {
        for cut in [
            r#""ab\"#,
            r#""ab\u"#,
            r#""ab\u00"#,
            r#""ab\ud83e"#,
            r#""ab\ud83e\"#,
            r#""ab\ud83e\u"#,
            r#""ab\ud83e\udd"#,
        ] {
            assert_eq!(shown(cut), "ab", "{cut}");
        }
        assert_eq!(shown(r#""ab\ud83e\udde0c"#), "ab🧠c");
        // A lone half (no writer makes one) is a replacement character, never an error.
        assert_eq!(shown(r#""a\ud83ex"#), "a\u{fffd}x");
        assert_eq!(shown(r#""a\udde0x"#), "a\u{fffd}x");
        assert_eq!(shown(r#""a\uzzzzx"#), "a\u{fffd}x");
    }

    #[test]
    fn anything_but_a_string_stays_json_text() {
        assert_eq!(
            shown(r#"{"a": "x\ny", "b": [1, 2"#),
            r#"{"a": "x\ny", "b": [1, 2"#
        );
        assert_eq!(shown("[\"\\u001b"), "[\"\\u001b");
    }
}
