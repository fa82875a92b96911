//! Long values and words as the UI's reads list them (README, "The terminal UI"): the store
//! reads only a value's first characters and its size, and hands the UI the string's own
//! characters — a newline, quotes, an escape, Chinese, emoji and backslashes as a short value
//! holds them — with the whole's size beside them; the same on SQLite and PostgreSQL.

use crate::support::{on_postgres, TestDb};
use memscope::model::{HistoryEvent, Identity, MemoryRecord};
use memscope::store::{open_ui, BrowseBound, HistoryFrom, OpenMode, UiStore, PREVIEW_BYTES};
use memscope::Scope;
use serde_json::{json, Value};

/// The characters of its stored JSON text a preview reads.
const PREVIEW_CHARS: usize = 1000;

/// The start of `value` a preview of its JSON text shows: every character whose escaped form
/// ends within the first `PREVIEW_CHARS` characters of that text (the opening quote first).
fn expected_start(value: &str) -> String {
    let mut used = 1;
    let mut out = String::new();
    for c in value.chars() {
        let escaped = serde_json::to_string(&c.to_string()).unwrap();
        used += escaped.chars().count() - 2;
        if used > PREVIEW_CHARS {
            break;
        }
        out.push(c);
    }
    out
}

/// `lines` applied through the binary (one write path).
fn apply(db: &TestDb, lines: &[Value]) {
    let input = db.sibling("in.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&input, text).unwrap();
    db.run(&["apply", input.to_str().unwrap()]).ok();
}

fn write(predicate: &str, value: Value, raw: Option<&str>) -> Value {
    let mut line = json!({"subject": "user:3", "predicate": predicate, "value": value,
        "scope": "global", "source": "s:1"});
    if let Some(raw) = raw {
        line["raw"] = json!(raw);
    }
    line
}

fn id(predicate: &str) -> Identity {
    Identity {
        subject: "user:3".into(),
        predicate: predicate.into(),
        scope: Scope::Global,
    }
}

/// Each of the UI's list reads of one record: the current view, the other scopes, the history
/// pane's timeline.
fn listed(ui: &dyn UiStore, predicate: &str) -> (MemoryRecord, MemoryRecord, HistoryEvent) {
    let row = (ui.browse_after(&BrowseBound::Start, 1000).unwrap())
        .into_iter()
        .find(|b| b.record.predicate == predicate)
        .unwrap_or_else(|| panic!("{predicate} is listed"))
        .record;
    let scopes = ui.live_scopes_of("user:3", predicate).unwrap();
    let events = (ui.history_page(&id(predicate), HistoryFrom::Start, 10)).unwrap();
    (row, scopes[0].clone(), events[0].clone())
}

/// A long string previews as its own characters and its size everywhere the UI lists it; the
/// whole value is read where the UI asks for it whole.
fn long_strings_preview_as_their_characters(db: &TestDb) {
    let tail = "y".repeat(5000);
    let real = format!("A\nB \"q\" \u{1b}[31m \u{202e} 仓库 🧠 {tail}");
    let literal = format!(r#"C:\new\table "\u001b" \\ {tail}"#);
    let words = format!("remember: {real}");
    let object = json!({"k": real, "n": [1, 2]});
    apply(
        db,
        &[
            write("realnl", json!(real), Some(&words)),
            write("literal", json!(literal), None),
            write("object", object.clone(), None),
            write("short", json!("A\nB \"q\" \u{1b}[31m"), Some("short words")),
        ],
    );
    let ui = open_ui(&db.path, OpenMode::Existing).unwrap();
    for (predicate, value) in [("realnl", &real), ("literal", &literal)] {
        let size = serde_json::to_string(value).unwrap().len() as i64;
        let start = json!(expected_start(value));
        let (row, scope, event) = listed(ui.as_ref(), predicate);
        for (what, shown, bytes) in [
            ("row", &row.value, row.value_bytes),
            ("scope", &scope.value, scope.value_bytes),
            ("event", event.value.as_ref().unwrap(), event.value_bytes),
        ] {
            assert_eq!(shown, &start, "{predicate} {what}");
            assert_eq!(bytes, Some(size), "{predicate} {what}");
        }
        // The store's read of the whole, as the event popup and `c` make it.
        let whole = ui.get(&id(predicate)).unwrap().unwrap();
        assert_eq!((&whole.value, whole.value_bytes), (&json!(value), None));
        let whole = ui.history_event(event.id).unwrap().unwrap();
        assert_eq!((whole.value, whole.value_bytes), (Some(json!(value)), None));
    }
    // The characters: a real newline, quotes and ESC, Chinese and emoji whole; literal
    // backslashes as they are, not doubled.
    let (row, _, event) = listed(ui.as_ref(), "realnl");
    let shown = row.value.as_str().unwrap();
    assert!(
        shown.starts_with("A\nB \"q\" \u{1b}[31m \u{202e} 仓库 🧠 yyy"),
        "{shown:?}"
    );
    let (literal_row, _, _) = listed(ui.as_ref(), "literal");
    let shown = literal_row.value.as_str().unwrap();
    assert!(
        shown.starts_with(r#"C:\new\table "\u001b" \\ yyy"#),
        "{shown:?}"
    );
    // The words: their first characters and their size.
    let start: String = words.chars().take(PREVIEW_CHARS).collect();
    for (raw, bytes) in [(&row.raw, row.raw_bytes), (&event.raw, event.raw_bytes)] {
        assert_eq!(raw.as_deref(), Some(start.as_str()));
        assert_eq!(bytes, Some(words.len() as i64));
    }
    // An object keeps showing as its JSON text.
    let (row, _, _) = listed(ui.as_ref(), "object");
    let text = serde_json::to_string(&object).unwrap();
    let start: String = text.chars().take(PREVIEW_CHARS).collect();
    assert_eq!(
        (row.value, row.value_bytes),
        (json!(start), Some(text.len() as i64))
    );
    // A short value and its words are read whole, no size.
    let (row, _, event) = listed(ui.as_ref(), "short");
    assert_eq!(row.value, json!("A\nB \"q\" \u{1b}[31m"));
    assert_eq!((row.value_bytes, row.raw_bytes), (None, None));
    assert_eq!((event.value_bytes, event.raw_bytes), (None, None));
}

#[test]
fn a_long_string_previews_as_its_own_characters_and_its_size() {
    long_strings_preview_as_their_characters(&TestDb::new());
}

#[test]
fn a_long_string_previews_as_its_own_characters_and_its_size_on_postgres() {
    on_postgres(|db| long_strings_preview_as_their_characters(&db));
}

/// An escape the 1,000-character cut splits is dropped, never an error: the preview is the
/// characters before it. A character outside the BMP is stored as itself, so the cut never
/// splits a surrogate pair of the store's own text (the decoder's test cuts escaped pairs).
fn a_cut_escape_is_dropped(db: &TestDb) {
    // The JSON text: the opening quote, `x`s, then an escape starting at character `at`.
    let cases: Vec<(String, String)> = [
        // `\u001b` cut after its backslash, after `\u0`, whole at the edge.
        (PREVIEW_CHARS - 1, "\u{1b}"),
        (PREVIEW_CHARS - 3, "\u{1b}"),
        (PREVIEW_CHARS - 6, "\u{1b}"),
        // `\n` and `\"` cut after the backslash.
        (PREVIEW_CHARS - 1, "\n"),
        (PREVIEW_CHARS - 1, "\""),
        // An emoji and a Chinese character at the last character.
        (PREVIEW_CHARS - 1, "🧠"),
        (PREVIEW_CHARS - 1, "仓"),
    ]
    .iter()
    .map(|(at, c)| {
        let value = format!("{}{c}{}", "x".repeat(at - 1), "z".repeat(PREVIEW_BYTES));
        (format!("edge{}_{}", at, c.escape_unicode()), value)
    })
    .collect();
    let lines: Vec<Value> = (cases.iter())
        .map(|(p, v)| write(p, json!(v), None))
        .collect();
    apply(db, &lines);
    let ui = open_ui(&db.path, OpenMode::Existing).unwrap();
    for (predicate, value) in &cases {
        let (row, _, event) = listed(ui.as_ref(), predicate);
        let start = expected_start(value);
        assert!(value.starts_with(&start));
        assert_eq!(row.value, json!(start), "{predicate}");
        assert_eq!(event.value, Some(json!(start)), "{predicate}");
        let size = serde_json::to_string(value).unwrap().len() as i64;
        assert_eq!(row.value_bytes, Some(size), "{predicate}");
    }
}

#[test]
fn an_escape_cut_at_the_preview_edge_is_dropped() {
    a_cut_escape_is_dropped(&TestDb::new());
}

#[test]
fn an_escape_cut_at_the_preview_edge_is_dropped_on_postgres() {
    on_postgres(|db| a_cut_escape_is_dropped(&db));
}
