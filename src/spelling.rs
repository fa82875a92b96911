//! Ids as a person reads them (README, "The model in one minute"): a subject, a predicate or a
//! repository or task id is compared in Unicode NFC, with look-alike dashes and the full-width
//! colon folded to their ASCII forms, and an id that holds a character nobody can see — a
//! zero-width space, a soft hyphen, a direction override, a lone combining mark — is refused
//! with one sentence that names the character and its position. Two ids that print alike are
//! one id; an id that prints like another is refused.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// `text` in NFC with look-alike punctuation folded, or one sentence saying which invisible
/// character stands where. `what` names the id in the sentence ("subject", "predicate" …).
pub fn readable_id(what: &str, text: &str) -> Result<String, String> {
    // ASCII, and the CJK characters `fold` takes as they are, are NFC, compose with nothing,
    // hold no invisible character and no combining mark: such an id is itself with its
    // look-alikes mapped, and `check` holds millions of stored ids to this function.
    if text.is_ascii() {
        return Ok(text.to_owned());
    }
    if text.chars().all(|c| c.is_ascii() || caseless_starter(c)) {
        return Ok(text.chars().map(fold_lookalike).collect());
    }
    readable_id_in_full(what, text)
}

/// [`readable_id`] without its shortcuts.
fn readable_id_in_full(what: &str, text: &str) -> Result<String, String> {
    let folded: String = text.nfc().map(fold_lookalike).collect();
    let chars: Vec<char> = folded.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let Some(name) = invisible_name(c) else {
            continue;
        };
        // Joiners and variation selectors are part of emoji and of some scripts' words:
        // allowed between two visible non-ASCII characters, nowhere else.
        if joins_a_word(c) && inside_a_word(&chars, i) {
            continue;
        }
        return Err(format!(
            "{what} has an invisible character, {name} (U+{:04X}), at position {}: type the {what} without it",
            c as u32,
            i + 1
        ));
    }
    starts_on_a_letter(what, &folded)?;
    Ok(folded)
}

/// Refuses an id whose first character is a combining mark with nothing to sit on (it prints
/// as nothing, or on the character before it). Normalizers that strip a prefix ask again.
pub fn starts_on_a_letter(what: &str, id: &str) -> Result<(), String> {
    match id.chars().next() {
        Some(first) if is_combining_mark(first) => Err(format!(
            "{what} begins with a lone combining mark (U+{:04X}) that has no letter to sit on: type the letter it belongs to",
            first as u32
        )),
        _ => Ok(()),
    }
}

/// Dashes and colons that look like ASCII ones but are not.
fn fold_lookalike(c: char) -> char {
    match c {
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2212}'
        | '\u{FE63}' | '\u{FF0D}' => '-',
        '\u{FF1A}' | '\u{FE55}' => ':',
        _ => c,
    }
}

/// The name of a character that prints as nothing or reorders what follows, if `c` is one.
fn invisible_name(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{00AD}' => "a soft hyphen",
        '\u{034F}' => "a combining grapheme joiner",
        '\u{061C}' => "an Arabic letter mark",
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' => "a Hangul filler",
        '\u{17B4}' | '\u{17B5}' => "a Khmer inherent vowel",
        '\u{180B}'..='\u{180F}' => "a Mongolian variation selector",
        '\u{200B}' => "a zero-width space",
        '\u{200C}' => "a zero-width non-joiner",
        '\u{200D}' => "a zero-width joiner",
        '\u{200E}' | '\u{200F}' => "a direction mark",
        '\u{202A}'..='\u{202E}' => "a direction embedding or override",
        '\u{2060}'..='\u{2064}' => "an invisible joiner or operator",
        '\u{2066}'..='\u{2069}' => "a direction isolate",
        '\u{206A}'..='\u{206F}' => "a deprecated format character",
        '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' => "a variation selector",
        '\u{FEFF}' => "a zero-width no-break space",
        '\u{E0000}'..='\u{E007F}' => "a tag character",
        _ => return None,
    })
}

/// Whether the character at `i` of `chars` prints as nothing where it stands — a zero-width
/// space, a soft hyphen, a direction control, a tag or joiner outside the word or emoji it
/// could join — so text printed for a person shows it escaped (README, "What agents and models
/// wrote is printed …"): `pnpm` and `pnpm` with a zero-width space after it are two values that
/// would otherwise look alike. A joiner inside an emoji or a word prints as part of it.
pub fn prints_as_nothing(chars: &[char], i: usize) -> bool {
    invisible_name(chars[i]).is_some() && !(joins_a_word(chars[i]) && inside_a_word(chars, i))
}

/// Whether `c` may print as nothing somewhere ([`prints_as_nothing`] says where it does): the
/// cheap test before looking at a character's neighbours.
pub fn may_print_as_nothing(c: char) -> bool {
    invisible_name(c).is_some()
}

/// Characters that carry meaning inside a word or an emoji sequence.
fn joins_a_word(c: char) -> bool {
    matches!(
        c,
        '\u{200C}' | '\u{200D}' | '\u{FE00}'..='\u{FE0F}' | '\u{E0020}'..='\u{E007F}'
    )
}

/// Whether the character at `i` stands after a visible non-ASCII character, and — for the
/// joiners — before one.
fn inside_a_word(chars: &[char], i: usize) -> bool {
    let visible = |c: Option<&char>| {
        c.is_some_and(|&c| !c.is_ascii() && invisible_name(c).is_none() && !c.is_whitespace())
    };
    let after_visible = i > 0 && (visible(chars.get(i - 1)) || joins_a_word(chars[i - 1]));
    let needs_next = matches!(chars[i], '\u{200C}' | '\u{200D}');
    after_visible && (!needs_next || visible(chars.get(i + 1)))
}

/// Whether `c` is a character lower case and NFC leave alone and that composes with nothing
/// (no case, a starter that is NFC by itself): CJK ideographs and the punctuation written
/// with them. A look-alike among them is mapped to ASCII punctuation, which is one too.
fn caseless_starter(c: char) -> bool {
    matches!(c,
        '\u{3000}'..='\u{3029}'   // CJK symbols and punctuation (before the combining marks)
        | '\u{3400}'..='\u{4DBF}' // CJK extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK unified ideographs
        | '\u{FF01}'..='\u{FF20}' // fullwidth punctuation and digits (before the letters)
    )
}

/// The key two spellings of one subject or repository/task id share: the readable id in
/// lower case (Unicode, not only ASCII), in NFC. `Web-App`, `web-app` and `WEB‑APP` fold alike;
/// the store keeps the first spelling it met for display (README, "One spelling per place").
pub fn fold(id: &str) -> String {
    // ASCII is already NFC and has no look-alikes: the common case takes no normalizer.
    if id.is_ascii() {
        return id.to_ascii_lowercase();
    }
    // Nor does ASCII mixed with Chinese (the words of many a write the scope guard reads).
    if id.chars().all(|c| c.is_ascii() || caseless_starter(c)) {
        return id
            .chars()
            .map(|c| fold_lookalike(c.to_ascii_lowercase()))
            .collect();
    }
    // Text that is NFC already and that lower case does not change (most words in a script
    // without case: the scope guard folds every global write's words) folds to itself with
    // its look-alikes mapped — to ASCII punctuation, which composes with nothing, so the text
    // stays NFC.
    if is_nfc_quick(id.chars()) == IsNormalized::Yes
        && id.chars().all(|c| {
            let mut lower = c.to_lowercase();
            lower.next() == Some(c) && lower.next().is_none()
        })
    {
        return id.chars().map(fold_lookalike).collect();
    }
    id.nfc()
        .map(fold_lookalike)
        .flat_map(char::to_lowercase)
        .nfc()
        .collect()
}

/// The skeleton two ids share when a reader could take one for the other: NFKC, lower case,
/// letters and digits only (`web-app`, `Web_App` and `webapp` share one).
pub fn skeleton(text: &str) -> String {
    text.nfkc()
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// Pairs of distinct ids that share a skeleton, each pair sorted, in order.
pub fn look_alike_pairs<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut by_skeleton: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for id in ids {
        by_skeleton.entry(skeleton(id)).or_default().push(id);
    }
    let mut pairs = Vec::new();
    for (key, mut ids) in by_skeleton {
        if key.is_empty() {
            continue;
        }
        ids.sort_unstable();
        ids.dedup();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                pairs.push((a.to_string(), b.to_string()));
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fold` without its shortcuts.
    fn fold_in_full(id: &str) -> String {
        id.nfc()
            .map(fold_lookalike)
            .flat_map(char::to_lowercase)
            .nfc()
            .collect()
    }

    #[test]
    fn fold_shortcuts_fold_as_the_full_path_does() {
        for text in [
            "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。",
            "用户原话：回答用中文",
            "café",
            "cafe\u{301}",
            "Web‑App",
            "ǅemal",
            "ΣΊΣΥΦΟΣ",
            "İstanbul",
            "ｒｅｐｏ：ｗｅｂ",
            "ＡＢＣ 全角",
            "repo\u{FF1A}web\u{2013}app",
            "한국어 저장소",
            "\u{1100}\u{1161}",
            "ß straße",
            // A look-alike before a combining mark: mapped to ASCII, which composes with nothing.
            "值\u{FF1A}\u{301}",
            "\u{2013}\u{301}x",
        ] {
            assert_eq!(fold(text), fold_in_full(text), "{text:?}");
        }
    }

    #[test]
    fn readable_id_shortcuts_answer_as_the_full_path_does() {
        // Every string of up to three characters over ASCII (letters, digits, separators,
        // controls), Chinese and full-width look-alikes, emoji and their joiners, invisible
        // characters and a combining mark.
        let alphabet = [
            'a',
            'Z',
            '0',
            '_',
            '-',
            ':',
            ' ',
            '\t',
            '\u{0}',
            '\u{7F}',
            '中',
            '值',
            '\u{3000}',
            '\u{FF1A}',
            '\u{FF0D}',
            '\u{FF21}',
            '\u{2013}',
            'é',
            'e',
            '\u{301}',
            '😀',
            '\u{200D}',
            '\u{FE0F}',
            '\u{200B}',
            '\u{AD}',
            '\u{202E}',
            '\u{E0041}',
        ];
        let mut texts = crate::model::every_string(&alphabet, 3);
        texts.extend(
            [
                "user:42",
                "package_manager",
                "用户原话：回答用中文",
                "repo\u{FF1A}web\u{2013}app",
                "👨\u{200D}👩\u{200D}👧",
                "❤\u{FE0F}",
                "cafe\u{301}",
            ]
            .map(String::from),
        );
        for text in &texts {
            assert_eq!(
                readable_id("id", text),
                readable_id_in_full("id", text),
                "{text:?}"
            );
        }
        for c in [
            '\u{3000}'..='\u{3029}',
            '\u{3400}'..='\u{4DBF}',
            '\u{4E00}'..='\u{9FFF}',
            '\u{FF01}'..='\u{FF20}',
        ]
        .into_iter()
        .flatten()
        {
            for text in [format!("{c}"), format!("Ab{c}"), format!("{c}\u{301}")] {
                assert_eq!(
                    readable_id("id", &text),
                    readable_id_in_full("id", &text),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn caseless_starters_fold_as_the_full_path_does() {
        let ranges = [
            '\u{3000}'..='\u{3029}',
            '\u{3400}'..='\u{4DBF}',
            '\u{4E00}'..='\u{9FFF}',
            '\u{FF01}'..='\u{FF20}',
        ];
        for c in ranges.into_iter().flatten() {
            assert!(caseless_starter(c));
            // Alone, after ASCII, and before a combining mark.
            for text in [format!("{c}"), format!("Ab{c}"), format!("{c}\u{301}")] {
                assert_eq!(fold(&text), fold_in_full(&text), "{text:?}");
            }
        }
    }

    #[test]
    fn composed_and_decomposed_are_one_spelling() {
        assert_eq!(readable_id("p", "cafe\u{301}").unwrap(), "café");
        assert_eq!(readable_id("p", "café").unwrap(), "café");
    }

    #[test]
    fn invisible_characters_are_named_with_their_position() {
        let e = readable_id("predicate", "pm\u{200B}").unwrap_err();
        assert!(
            e.contains("zero-width space (U+200B), at position 3"),
            "{e}"
        );
        let e = readable_id("subject", "u\u{202E}ser").unwrap_err();
        assert!(e.contains("direction embedding or override"), "{e}");
        assert!(readable_id("p", "\u{00AD}")
            .unwrap_err()
            .contains("soft hyphen"));
        let e = readable_id("p", "\u{0301}").unwrap_err();
        assert!(e.contains("lone combining mark"), "{e}");
        assert!(readable_id("p", "\u{200D}pm").is_err());
        assert!(readable_id("p", "pm\u{FE0F}").is_err());
    }

    #[test]
    fn emoji_sequences_and_joined_scripts_stay() {
        for ok in [
            "👨\u{200D}👩\u{200D}👧",
            "❤\u{FE0F}",
            "می\u{200C}خواهم",
            "用户:小明🧠",
        ] {
            assert_eq!(readable_id("subject", ok).unwrap(), ok, "{ok:?}");
        }
    }

    #[test]
    fn look_alike_dashes_and_colons_fold() {
        assert_eq!(readable_id("id", "web\u{2011}app").unwrap(), "web-app");
        assert_eq!(readable_id("id", "web\u{2212}app").unwrap(), "web-app");
        assert_eq!(readable_id("id", "repo\u{FF1A}x").unwrap(), "repo:x");
    }

    #[test]
    fn readable_ids_are_stable() {
        for s in ["café", "web-app", "👨\u{200D}👩", "ℂ", "İstanbul"] {
            let once = readable_id("id", s).unwrap();
            assert_eq!(readable_id("id", &once).unwrap(), once);
        }
    }

    #[test]
    fn case_folds_beyond_ascii_and_is_stable() {
        assert_eq!(fold("Web-App"), fold("web\u{2011}APP"));
        assert_eq!(fold("ÄRGER"), "ärger");
        assert_eq!(fold("Cafe\u{301}"), "café");
        assert_eq!(fold("用户:小明🧠"), "用户:小明🧠");
        for s in ["İstanbul", "ΣΊΣΥΦΟΣ", "ǅ", "user:42"] {
            assert_eq!(fold(&fold(s)), fold(s), "{s:?}");
        }
        assert_ne!(fold("web-app"), fold("web_app"));
    }

    #[test]
    fn folding_grows_an_id_by_half_at_most() {
        // The id limit keeps a spelling key (the folded id) within PostgreSQL's index entry
        // (`model::MAX_ID_BYTES`): lower case lengthens UTF-8 by half at most, and only a few
        // characters lengthen at all (İ → i̇, Ⱥ → ⱥ).
        let mut longest = (1.0f64, ' ');
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let Ok(id) = readable_id("id", &c.to_string()) else {
                continue;
            };
            let growth = fold(&id).len() as f64 / id.len() as f64;
            if growth > longest.0 {
                longest = (growth, c);
            }
        }
        assert!(longest.0 <= 1.5, "{longest:?}");
        let dotted = "İ".repeat(crate::model::MAX_ID_BYTES / 2);
        assert_eq!(dotted.len(), crate::model::MAX_ID_BYTES);
        assert_eq!(fold(&dotted).len(), crate::model::MAX_ID_BYTES * 3 / 2);
    }

    #[test]
    fn look_alikes_pair_up() {
        let pairs = look_alike_pairs(["web-app", "web_app", "webapp", "Web-App", "api"]);
        assert_eq!(pairs.len(), 6, "{pairs:?}");
        assert!(look_alike_pairs(["a1", "a2", "b"]).is_empty());
    }
}
