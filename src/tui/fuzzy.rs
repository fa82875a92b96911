//! The filter's match test, exact and cheap. A query is words (split at whitespace), each
//! matched on its own, in any order — `legacy npm` finds what `npm legacy` finds (found by an
//! exploratory test: the scope is shown first, so a user types it first, and a match in the
//! fields' fixed order found nothing). For each word, `SkimMatcherV2` (default settings, smart case)
//! finds a match exactly when the query is a subsequence of the haystack, char by char, with
//! its `cheap_matches` comparison: a query holding an ASCII upper-case letter compares chars
//! exactly, any other query ignores ASCII case only (`char::eq_ignore_ascii_case`; `É` and `é`
//! differ). Only then does it build its score matrix, and that always yields a score. The scan
//! keeps record ids, not scores, so this test is all it needs; scores and highlights of the
//! rows on screen still come from the matcher (`list::highlight`).
//!
//! The test runs over the UTF-8 bytes: every query char becomes a needle (one byte, an ASCII
//! letter in either case, or a non-ASCII char's encoding) searched leftmost from where the last
//! one ended, which is the greedy walk of `cheap_matches`. A non-ASCII char's encoding only
//! occurs at a char boundary in valid UTF-8, and ASCII bytes occur only as themselves, so a
//! byte match is a char match.

/// One query char, as bytes to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Needle {
    Byte(u8),
    /// An ASCII letter of a query without upper case: either case matches.
    Letter {
        lower: u8,
        upper: u8,
    },
    /// A non-ASCII char: its UTF-8 encoding.
    Encoded([u8; 4], u8),
}

impl Needle {
    /// The end of the leftmost occurrence in `hay`.
    fn find_end(&self, hay: &[u8]) -> Option<usize> {
        match *self {
            Needle::Byte(b) => hay.iter().position(|&c| c == b).map(|i| i + 1),
            Needle::Letter { lower, upper } => hay
                .iter()
                .position(|&c| c == lower || c == upper)
                .map(|i| i + 1),
            Needle::Encoded(bytes, len) => {
                let enc = &bytes[..len as usize];
                let mut from = 0;
                while let Some(i) = hay[from..].iter().position(|&c| c == enc[0]) {
                    let start = from + i;
                    if hay[start..].starts_with(enc) {
                        return Some(start + enc.len());
                    }
                    from = start + 1;
                }
                None
            }
        }
    }
}

/// A query ready to test haystacks with: each word's needles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    words: Vec<Vec<Needle>>,
}

impl Pattern {
    pub fn new(query: &str) -> Pattern {
        let words = query.split_whitespace().map(needles).collect();
        Pattern { words }
    }

    /// Whether SkimMatcherV2 matches every word of the query in `parts` joined by single
    /// spaces (the layout of `list::haystack`), without joining them. No word matches all.
    pub fn matches_joined(&self, parts: &[&str]) -> bool {
        self.words.iter().all(|word| word_matches(word, parts))
    }

    /// Whether SkimMatcherV2 matches every word of the query in `hay`.
    pub fn matches(&self, hay: &str) -> bool {
        self.matches_joined(&[hay])
    }
}

/// One word's needles. Smart case, as SkimMatcherV2 decides it for the word: only ASCII upper
/// case makes it exact.
fn needles(word: &str) -> Vec<Needle> {
    let exact = word.chars().any(|c| c.is_ascii_uppercase());
    word.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() && !exact {
                Needle::Letter {
                    lower: c.to_ascii_lowercase() as u8,
                    upper: c.to_ascii_uppercase() as u8,
                }
            } else if c.is_ascii() {
                Needle::Byte(c as u8)
            } else {
                let mut bytes = [0u8; 4];
                let len = c.encode_utf8(&mut bytes).len() as u8;
                Needle::Encoded(bytes, len)
            }
        })
        .collect()
}

/// Whether one word (no whitespace in it) is a subsequence of `parts` joined by spaces: the
/// joining spaces are never its needles, so the parts are walked in turn.
fn word_matches(needles: &[Needle], parts: &[&str]) -> bool {
    let mut k = 0;
    for part in parts {
        let mut hay = part.as_bytes();
        while k < needles.len() {
            match needles[k].find_end(hay) {
                Some(end) => {
                    hay = &hay[end..];
                    k += 1;
                }
                None => break,
            }
        }
    }
    k == needles.len()
}

#[cfg(test)]
mod tests {
    use super::Pattern;
    use crate::tui::list::haystack;
    use fuzzy_matcher::skim::SkimMatcherV2;
    use fuzzy_matcher::FuzzyMatcher;
    use proptest::prelude::*;

    /// SkimMatcherV2's match of every whitespace-separated word of `query`.
    fn skim(hay: &str, query: &str) -> bool {
        let matcher = SkimMatcherV2::default();
        query
            .split_whitespace()
            .all(|word| matcher.fuzzy_match(hay, word).is_some())
    }

    /// The four fields as the scan passes them, and the same joined as the matcher sees them.
    fn agree(parts: [&str; 4], query: &str) {
        let mut hay = String::new();
        haystack(&mut hay, parts[0], parts[1], parts[2], parts[3]);
        let p = Pattern::new(query);
        let want = skim(&hay, query);
        assert_eq!(p.matches(&hay), want, "{query:?} in {hay:?}");
        assert_eq!(p.matches_joined(&parts), want, "{query:?} in {parts:?}");
    }

    /// Records (subject, predicate, value, scope) and queries to try on each.
    const EXAMPLES: &[([&str; 4], &str)] = &[
        (
            ["user:42", "package_manager", "pnpm #42", "repo:memscope"],
            "|p|pnpm|pnpm #42|PNPM|Pnpm|user:42 pnpm|r pnpm|42 repo|memscope|memscopex|  |r:m|#|zz",
        ),
        (
            [
                "user:7",
                "reply_language",
                "回复用中文，技术名词保留英文",
                "global",
            ],
            "中文|回复英文|文回|reply 中|英文 g|REPLY|中文 x|☕",
        ),
        (
            ["user:☕", "drink", "☕ 燕麦拿铁 oat latte 👩‍💻", "task:café"],
            "☕|☕☕|👩‍💻|💻|oat|OAT|caf|café|CAFÉ|e\u{301}|拿铁",
        ),
        // ASCII case only: É/é, the Kelvin sign and the dotted İ are not folded.
        (
            ["ÉCOLE", "K kelvin", "İstanbul", "straße"],
            "école|École|k|K|istanbul|i\u{307}stanbul|STRASSE|ß",
        ),
    ];

    #[test]
    fn fuzzy_pattern_is_skims_match_on_examples() {
        for (rec, queries) in EXAMPLES {
            for q in queries.split('|') {
                agree(*rec, q);
            }
        }
        let long = "lorem ipsum dolor sit amet ".repeat(400) + "终点 the end";
        agree(["user:1", "note", &long, "global"], "终点 end");
        agree(["user:1", "note", &long, "global"], "终点 endz");
        agree(["user:1", "note", &long, "global"], &"mus ".repeat(50));
    }

    #[test]
    fn fuzzy_pattern_words_match_in_any_order() {
        let p = Pattern::new("a b");
        assert!(p.matches_joined(&["xa", "bx", "", ""]));
        assert!(p.matches_joined(&["a", "", "", "b"]));
        assert!(p.matches_joined(&["ab", "", "", ""]));
        assert!(p.matches_joined(&["b", "", "", "a"]));
        assert!(!p.matches_joined(&["a", "", "", ""]));
        // A word may run across fields, as one query did.
        assert!(Pattern::new("42pnpm").matches_joined(&["user:42", "pm", "pnpm", "global"]));
        let rec = [
            "user:5",
            "package_manager",
            "npm ci 🚀",
            "repo:legacy-dashboard",
        ];
        for q in ["legacy npm", "npm legacy", "repo:legacy npm", "🚀 dash  ci"] {
            assert!(Pattern::new(q).matches_joined(&rec), "{q}");
        }
        assert!(!Pattern::new("legacy yarn").matches_joined(&rec));
        assert!(Pattern::new("").matches_joined(&["", "", "", ""]));
        assert!(Pattern::new("   ").matches_joined(&["", "", "", ""]));
        assert!(Pattern::new(" \t ").matches_joined(&["x", "", "", ""]));
    }

    /// Chars that exercise case, separators and multi-byte encodings.
    const ALPHABET: &[char] = &[
        'a', 'b', 'A', 'B', 'z', 'Z', 'k', 'K', 'i', 's', '1', '#', ' ', ':', '_', '-', '"', 'é',
        'É', 'ß', 'İ', '\u{212A}', '\u{301}', '中', '文', '英', '☕', '👩', '\u{200D}', '💻', '\0',
    ];

    fn text(max: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(ALPHABET), 0..max)
            .prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn fuzzy_pattern_agrees_with_skim_on_small_alphabets(
            parts in [text(12), text(12), text(40), text(12)],
            query in text(6),
        ) {
            let parts = [&*parts[0], &*parts[1], &*parts[2], &*parts[3]];
            agree(parts, &query);
        }

        #[test]
        fn fuzzy_pattern_agrees_with_skim_on_any_text(
            parts in [any::<String>(), any::<String>(), any::<String>(), any::<String>()],
            query in any::<String>(),
        ) {
            let parts = [&*parts[0], &*parts[1], &*parts[2], &*parts[3]];
            agree(parts, &query);
            // A query taken from the haystack itself matches far more often.
            let hay: String = parts.concat();
            let picked: String = hay.chars().step_by(3).take(5).collect();
            agree(parts, &picked);
        }
    }
}
