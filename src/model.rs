//! The domain: identities, scopes, values and what a write can come to. Plain serde types;
//! nothing here touches SQL or a terminal.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Where a memory applies. Canonical text form: `global`, `repo:<id>`, `task:<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Global,
    Repo(String),
    Task(String),
}

impl Scope {
    /// Parses the canonical text form; the error is one sentence a user can act on.
    pub fn parse(text: &str) -> Result<Scope, String> {
        let t = text.trim();
        // The kind in any case (`Global`, `REPO:web-app`), as `--repo`/`--task` take it; the id
        // keeps its own.
        if t.eq_ignore_ascii_case("global") {
            return Ok(Scope::Global);
        }
        // A full-width colon reads as a colon.
        let colon;
        let t = if t.contains('\u{FF1A}') {
            colon = t.replace('\u{FF1A}', ":");
            colon.as_str()
        } else {
            t
        };
        let (kind, id) = match t.split_once(':') {
            Some(parts) => parts,
            None => {
                return Err(format!(
                    "unknown scope '{}': use global, repo:<id> or task:<id>",
                    shorten(t, 60).escape_debug()
                ))
            }
        };
        // The kind first: an id is only asked of a kind that takes one (found by review:
        // `global:` and `foo:` were told to add an id).
        let example = match kind.to_ascii_lowercase().as_str() {
            "repo" => "legacy-dashboard",
            "task" => "fix-lockfile-123",
            "global" => return Err("global takes no id: write global".into()),
            _ => {
                return Err(format!(
                    "unknown scope '{}': use global, repo:<id> or task:<id>",
                    shorten(t, 60).escape_debug()
                ))
            }
        };
        if id.is_empty() {
            // An example of the kind named (found by review: `task:` was shown a repository's).
            let kind = shorten(kind, 20).escape_debug().to_string();
            return Err(format!(
                "scope '{kind}:' has no id: write it as {kind}:<id>, e.g. {kind}:{example}"
            ));
        }
        if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "scope id '{}' contains whitespace or control characters: ids are single words",
                shorten(id, 60).escape_debug()
            ));
        }
        let id = crate::spelling::readable_id("scope id", id)?;
        match kind.to_ascii_lowercase().as_str() {
            "repo" => Ok(Scope::Repo(id)),
            _ => Ok(Scope::Task(id)),
        }
    }

    /// Precedence rank for resolution and grouping: task > repo > global.
    pub fn rank(&self) -> u8 {
        match self {
            Scope::Task(_) => 2,
            Scope::Repo(_) => 1,
            Scope::Global => 0,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Repo(_) => "repo",
            Scope::Task(_) => "task",
        }
    }

    /// The id of a repository or task scope; `global` has none.
    pub fn id(&self) -> Option<&str> {
        match self {
            Scope::Global => None,
            Scope::Repo(id) | Scope::Task(id) => Some(id),
        }
    }

    /// Refuses a scope whose id is past [`MAX_ID_BYTES`] ([`within_id_limit`]).
    pub fn within_id_limit(&self) -> Result<(), String> {
        self.id()
            .map_or(Ok(()), |id| within_id_limit("scope id", id))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Global => write!(f, "global"),
            Scope::Repo(id) => write!(f, "repo:{id}"),
            Scope::Task(id) => write!(f, "task:{id}"),
        }
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written straight from `Display`: no string is built per scope (every `apply` outcome
        // carries one).
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Scope::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a context id names: the repository an agent works in, or the task it works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextKind {
    Repo,
    Task,
}

impl ContextKind {
    /// `repo` or `task`: the scope prefix, and the flag's name.
    pub fn name(self) -> &'static str {
        match self {
            ContextKind::Repo => "repo",
            ContextKind::Task => "task",
        }
    }

    /// `repository` or `task`: what the id names, in a sentence.
    pub fn noun(self) -> &'static str {
        match self {
            ContextKind::Repo => "repository",
            ContextKind::Task => "task",
        }
    }

    fn example(self) -> &'static str {
        match self {
            ContextKind::Repo => "web-app",
            ContextKind::Task => "fix-1",
        }
    }

    fn other(self) -> ContextKind {
        match self {
            ContextKind::Repo => ContextKind::Task,
            ContextKind::Task => ContextKind::Repo,
        }
    }
}

/// The id of a repository or task as a person or host gives it: `web-app`, or in its scope's
/// form `repo:web-app` — the same id. The other kind's form (`task:x` given as a repository) is
/// refused: resolving it would silently answer a different question. Every front end parses
/// repo and task ids here; the error is one sentence.
pub fn parse_context_id(kind: ContextKind, text: &str) -> Result<String, String> {
    let t = text.trim();
    let other = kind.other();
    // The kind in any case (`Repo:Web-App`, `TASK:x`): a person typed it; the id keeps its own.
    let strip_kind = |name: &str| {
        t.get(..name.len())
            .filter(|head| head.eq_ignore_ascii_case(name))
            .and_then(|_| t[name.len()..].strip_prefix(':'))
    };
    if strip_kind(other.name()).is_some() {
        return Err(format!(
            "'{}' is a {}, not a {}: pass it as the {}, or name a {} ({} or {}:{})",
            shorten(t, 60).escape_debug(),
            other.noun(),
            kind.noun(),
            other.noun(),
            kind.noun(),
            kind.example(),
            kind.name(),
            kind.example(),
        ));
    }
    let id = strip_kind(kind.name()).unwrap_or(t);
    // The id as the store keeps it (NFC, look-alike dashes folded: see `spelling`).
    match Scope::parse(&format!("{}:{id}", kind.name()))? {
        Scope::Repo(id) | Scope::Task(id) => Ok(id),
        Scope::Global => Ok(id.to_string()),
    }
}

/// [`parse_context_id`] for an id given by name — a flag, an environment variable or a request's
/// field (`--in-task`, `MEMSCOPE_REPO`, `context.task`) — whose refusal names it: an empty one is
/// said to be empty, not called the scope `task:` with no id, which the user never wrote.
pub fn named_context_id(kind: ContextKind, text: &str, from: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(format!(
            "{from} is empty: give a {} id such as {}, or leave it out",
            kind.noun(),
            kind.example()
        ));
    }
    parse_context_id(kind, text).map_err(|e| format!("{from}: {e}"))
}

/// (subject, predicate, scope): two records are the same memory only when all three match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Identity {
    pub subject: String,
    pub predicate: String,
    pub scope: Scope,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} · {} @ {}", self.subject, self.predicate, self.scope)
    }
}

/// A write names one scope, or the candidates a human must choose between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeChoice {
    Exact(Scope),
    Ambiguous(Vec<Scope>),
}

impl ScopeChoice {
    /// Ambiguous writes need two or more distinct candidates.
    pub fn ambiguous(candidates: Vec<Scope>) -> Result<ScopeChoice, String> {
        // `repo:Web-App` and `repo:web-app` are one place (README, "One spelling per place").
        let mut distinct: Vec<Scope> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        for c in candidates {
            let key = crate::spelling::fold(&c.to_string());
            if !keys.contains(&key) {
                keys.push(key);
                distinct.push(c);
            }
        }
        if distinct.len() < 2 {
            return Err(
                "an ambiguous write needs at least two distinct candidate scopes, e.g. global,repo:web-app"
                    .to_string(),
            );
        }
        Ok(ScopeChoice::Ambiguous(distinct))
    }

    /// Parses the comma list of `--ambiguous`. An empty item (`global,,repo:a`, a trailing
    /// comma) is refused rather than skipped: it is most often a candidate lost in typing.
    pub fn parse_candidates(text: &str) -> Result<ScopeChoice, String> {
        let items: Vec<&str> = text.split(',').collect();
        if items.len() > 1 && items.iter().any(|s| s.trim().is_empty()) {
            return Err(
                "a candidate scope in the list is empty (two commas in a row, or one at an end): \
                 list the candidates separated by single commas, e.g. global,repo:web-app"
                    .to_string(),
            );
        }
        let scopes = items
            .into_iter()
            .map(Scope::parse)
            .collect::<Result<Vec<_>, _>>()?;
        ScopeChoice::ambiguous(scopes)
    }
}

impl Serialize for ScopeChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ScopeChoice::Exact(scope) => scope.serialize(s),
            ScopeChoice::Ambiguous(c) => {
                #[derive(Serialize)]
                struct A<'a> {
                    ambiguous: &'a [Scope],
                }
                A { ambiguous: c }.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for ScopeChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = crate::strict_json::value(d)?;
        match v {
            Value::String(s) => Scope::parse(&s)
                .map(ScopeChoice::Exact)
                .map_err(serde::de::Error::custom),
            Value::Object(map) if map.keys().any(|k| k != "ambiguous") => {
                // Found by review: `{"ambiguous": […], "extra": 1}` was taken, the key dropped.
                let other = map
                    .keys()
                    .find(|k| *k != "ambiguous")
                    .cloned()
                    .unwrap_or_default();
                Err(serde::de::Error::custom(format!(
                    "the scope object holds {}, a key memscope does not know: it must be {{\"ambiguous\": [\"global\", \"repo:<id>\", …]}} alone",
                    to_json(&shorten(&other, 40)).unwrap_or_default()
                )))
            }
            Value::Object(map) => match map.get("ambiguous") {
                Some(Value::Array(items)) => {
                    let mut scopes = Vec::new();
                    for item in items {
                        match item {
                            Value::String(s) => {
                                scopes.push(Scope::parse(s).map_err(serde::de::Error::custom)?)
                            }
                            _ => {
                                return Err(serde::de::Error::custom(
                                    "ambiguous candidates must be scope strings",
                                ))
                            }
                        }
                    }
                    ScopeChoice::ambiguous(scopes).map_err(serde::de::Error::custom)
                }
                _ => Err(serde::de::Error::custom(
                    "scope object must be {\"ambiguous\": [\"global\", \"repo:<id>\", …]}",
                )),
            },
            _ => Err(serde::de::Error::custom(
                "scope must be a string like \"repo:web-app\" or {\"ambiguous\": [...]}",
            )),
        }
    }
}

/// One write request, as `apply` reads it and `write` builds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    pub subject: String,
    pub predicate: String,
    /// Read with each object's keys once (`strict_json`).
    #[serde(deserialize_with = "crate::strict_json::value")]
    pub value: Value,
    pub scope: ScopeChoice,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "causal_seq_field"
    )]
    pub causal_seq: Option<i64>,
    /// Where the write was made — the agent's repository and task when it heard the words —
    /// which is not its scope: the scope guard weighs the words against it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "context_field"
    )]
    pub context: Option<WriteContext>,
}

/// A request's `causal_seq`: any JSON value is read, so that one that is not a whole number
/// (`1.5`, `1e3`, past 64 bits, `"7"`) is refused in a sentence naming the field and its range rather
/// than serde's "invalid type: floating point".
fn causal_seq_field<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "causal_seq must be a whole number from 1 to {MAX_BROUGHT_SEQ_WORDS} (or one `memscope seq` handed out), got {}",
                shorten(&value_text(&v), 40)
            ))
        }),
    }
}

/// One JSON line as a request. serde_json stops at 128 levels of nesting, the line's own object
/// counted, which would refuse a value of [`MAX_VALUE_DEPTH`] levels that `write` and MCP take
/// (found by review); a line measured to be no deeper than that is read past serde_json's limit.
fn parse_line(line: &str) -> serde_json::Result<WriteRequest> {
    match serde_json::from_str(line) {
        Err(e)
            if e.to_string().starts_with("recursion limit exceeded")
                && crate::json_scan::nesting(line.as_bytes()) <= MAX_VALUE_DEPTH + 1 =>
        {
            let mut de = serde_json::Deserializer::from_str(line);
            de.disable_recursion_limit();
            let req = WriteRequest::deserialize(&mut de)?;
            de.end()?;
            Ok(req)
        }
        read => read,
    }
}

/// A request's `context`: anything but an object (or null) is refused in a sentence showing the
/// form, rather than serde's "expected struct WriteContext".
fn context_field<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<WriteContext>, D::Error> {
    match Option::<crate::strict_json::Strict>::deserialize(d)?.map(|s| s.0) {
        None => Ok(None),
        Some(v @ Value::Object(_)) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("context: {e}"))),
        Some(other) => Err(serde::de::Error::custom(format!(
            "context must be an object naming where the write was made, like {{\"repo\": \"web-app\", \"task\": \"fix-1\"}}, got {}",
            shorten(&other.to_string(), 40)
        ))),
    }
}

/// The place a write was made in (`"context": {"repo": "web-app", "task": "fix-1"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

impl WriteRequest {
    /// Parses one JSON line; the error is one sentence naming the problem, with the column
    /// (of that line) where the parser stopped.
    pub fn from_json_line(line: &str) -> Result<WriteRequest, LineError> {
        let req: WriteRequest = parse_line(line).map_err(|e| {
            let (msg, column) = json_error(&e, line);
            // serde repeats offending keys and values: keep the sentence short. A field named
            // twice is said as a doubled key inside the value is (`strict_json`).
            let msg = match msg
                .strip_prefix("duplicate field `")
                .and_then(|rest| rest.strip_suffix('`'))
            {
                Some(field) => format!(
                    "{} {} twice",
                    crate::strict_json::DUPLICATE_KEY,
                    to_json(field).unwrap_or_default()
                ),
                None => shorten(&msg, 300),
            };
            let top = line.trim_start().chars().next();
            let message = if msg.starts_with("recursion limit exceeded") {
                format!(
                    "the line is nested deeper than memscope keeps values (at most {MAX_VALUE_DEPTH} levels of arrays and objects inside `value`): store a flatter value"
                )
            } else if top == Some('\u{feff}') {
                // Found by review: a byte-order mark inside a file (two files joined, say) read
                // as "malformed JSON (expected value)".
                "the line starts with a byte-order mark (U+FEFF), which JSON does not allow: save the file as UTF-8 without a BOM, or remove the mark from this line".to_string()
            } else if msg.starts_with("number out of range") {
                // Valid JSON, past what a double holds (found by review: it read as malformed).
                format!("invalid write request: {OUT_OF_RANGE}")
            } else if e.is_syntax() || e.is_eof() {
                format!("malformed JSON ({msg}): each line must be one JSON object")
            } else if let Some(wrong) = wrong_field_type(line) {
                format!("invalid write request: {wrong}")
            } else if top != Some('{') {
                // serde would name the Rust type it wanted ("expected struct WriteRequest").
                let got = match top {
                    Some('[') => "an array",
                    Some('"') => "a string",
                    Some('t' | 'f') => "a boolean",
                    Some('n') => "null",
                    _ => "a number",
                };
                format!(
                    "invalid write request: each line must be one JSON object such as {{\"subject\":\"user:42\",\"predicate\":\"package_manager\",\"value\":\"pnpm\",\"scope\":\"global\",\"source\":\"thread:1\"}}, got {got}"
                )
            } else {
                format!("invalid write request: {msg}")
            };
            LineError { message, column }
        })?;
        if has_float(&req.value) {
            if let Some((at, literal)) = inexact_number(line.as_bytes()) {
                return Err(LineError {
                    message: format!(
                        "invalid write request: {}",
                        inexact_number_sentence(literal)
                    ),
                    column: Some(line[..at].chars().count() as u64 + 1),
                });
            }
        }
        Ok(req)
    }
}

/// A line of JSON Lines that could not be read: the sentence, and the column of that line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub message: String,
    pub column: Option<u64>,
}

/// `a string`, `an array`, `null`: a JSON value's type as a sentence names it.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a number JSON allows is refused: past the largest a double holds.
pub const OUT_OF_RANGE: &str = "a number is past ±1.8e308, the largest memscope reads (an IEEE double): a value that large must be stored as a string";

/// The first field of a write request whose value has the wrong JSON type, as a sentence naming
/// it (`subject must be a string, got 5`): serde's own message names only the types. `None` when
/// the line is no object or every field has its type.
fn wrong_field_type(line: &str) -> Option<String> {
    let map = match crate::strict_json::from_str(line) {
        Ok(Value::Object(map)) => map,
        // A key named twice is said as such, whichever of its values has the wrong type
        // (found by review: the type error hid the doubled key).
        Err(e) if crate::strict_json::is_duplicate_key(&e) => return Some(json_error(&e, line).0),
        _ => return None,
    };
    // `causal_seq` and `context` say their own (their deserializers name them).
    type Fits = fn(&Value) -> bool;
    let fields: [(&str, &str, Fits); 5] = [
        ("subject", "a string", Value::is_string),
        ("predicate", "a string", Value::is_string),
        ("source", "a string", Value::is_string),
        ("raw", "a string", |v| v.is_string() || v.is_null()),
        (
            "scope",
            "a string like \"repo:web-app\" or {\"ambiguous\": [...]}",
            |v| v.is_string() || v.is_object(),
        ),
    ];
    fields.iter().find_map(|(name, want, fits)| {
        let v = map.get(*name)?;
        (!fits(v)).then(|| match v {
            Value::Null => format!("{name} must be {want}, got null"),
            v => format!(
                "{name} must be {want}, got {} {}",
                json_kind(v),
                shorten(&value_text(v), 40)
            ),
        })
    })
}

/// serde_json's message without the ` at line 1 column N` it appends — a line of JSON Lines
/// is reported by its own number, once — and the column, counted in characters of `text`.
pub fn json_error(e: &serde_json::Error, text: &str) -> (String, Option<u64>) {
    let full = e.to_string();
    if e.line() == 0 {
        return (full, None);
    }
    let location = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&location).unwrap_or(&full).to_string();
    // serde_json counts the bytes of the line it stopped on; a person counts characters: the
    // column is the character that holds the byte serde_json names.
    let line_text = text.lines().nth(e.line() - 1).unwrap_or("");
    let column = line_text
        .char_indices()
        .take_while(|(at, _)| *at < e.column())
        .count();
    (message, Some(column as u64))
}

/// The largest causal number the clock keeps (2^53: exact in every JSON client).
pub const MAX_CAUSAL_SEQ: i64 = 1 << 53;

/// The largest causal number a writer may bring: 2^53 − 2^32. The clock's last 2^32 numbers
/// stay for writes without a number of their own, so no number a writer brings can leave the
/// clock none to order a later write by (found by review: one `apply` line with causal_seq
/// 2^53 made every later write without its own refused, with no remedy).
pub const MAX_BROUGHT_SEQ: i64 = MAX_CAUSAL_SEQ - (1 << 32);

/// [`MAX_BROUGHT_SEQ`] as the messages name it.
pub const MAX_BROUGHT_SEQ_WORDS: &str = "2^53 − 2^32 (9007194959773696)";

/// The rule for a number a writer brings, once the clock is known (inside the write's
/// transaction, on both backends): one above [`MAX_BROUGHT_SEQ`] would move the clock into the
/// numbers it keeps for writes without their own, so it is refused — unless the clock has
/// already reached it (`memscope seq` handed it out), when it moves nothing. The clock only
/// rises, so a number found within it stays within it.
pub fn brought_within_clock(seq: i64, clock: i64) -> Result<(), InvalidRequest> {
    if seq <= MAX_BROUGHT_SEQ || seq <= clock {
        return Ok(());
    }
    Err(brought_ahead(seq, Some(clock)))
}

/// The refusal [`brought_within_clock`] gives, naming the clock where it is known.
pub fn brought_ahead(seq: i64, clock: Option<i64>) -> InvalidRequest {
    let clock = clock.map(|c| format!(" ({c})")).unwrap_or_default();
    InvalidRequest(format!(
        "causal_seq {seq} is past {MAX_BROUGHT_SEQ_WORDS} and ahead of the causal clock{clock}: the clock keeps the numbers above that for writes without one of their own, so a writer may bring one only once `memscope seq` has handed it out; leave it out, and the clock orders the write"
    ))
}

/// Why a write without a causal number of its own is refused once the clock stands at
/// [`MAX_CAUSAL_SEQ`] (a database an earlier release let a writer bring there, or a login that
/// moved the clock by SQL): no later number exists to order it by.
pub const CLOCK_EXHAUSTED: &str = "the causal clock stands at 2^53, the largest causal number memscope keeps (an earlier release let a writer bring it as its causal_seq, or a client moved it there), so no write can be ordered after it: writes that bring a causal_seq of their own are still decided against it";

/// The refusal of a write the clock has no number left for ([`CLOCK_EXHAUSTED`]): that line's
/// error alone — an `apply` batch's other lines stand, as when each is written by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockExhausted;

impl fmt::Display for ClockExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(CLOCK_EXHAUSTED)
    }
}

impl std::error::Error for ClockExhausted {}

/// `seq`, a causal number the clock just handed out, or the refusal past [`MAX_CAUSAL_SEQ`].
pub fn within_clock(seq: i64) -> anyhow::Result<i64> {
    if seq > MAX_CAUSAL_SEQ {
        return Err(ClockExhausted.into());
    }
    Ok(seq)
}

/// The clock as it stands for everyone reading it: a PostgreSQL sequence asked for a number at
/// its end moves past [`MAX_CAUSAL_SEQ`] though no write took one (each was refused), so the
/// clock is said, exported and checked as 2^53 there.
pub fn clock_as_it_stands(clock: i64) -> i64 {
    clock.min(MAX_CAUSAL_SEQ)
}

/// A write request that fails validation: the caller's input is wrong (CLI exit code 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequest(pub String);

impl fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidRequest {}

/// What a write came to (README, "The model in one minute").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeKind {
    Inserted,
    Confirmed,
    Superseded,
    Stale,
    Pending,
    Rejected,
    /// A repair (rescope) took a record out of the current view without a tombstone.
    Removed,
    Error,
}

impl OutcomeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Inserted => "inserted",
            OutcomeKind::Confirmed => "confirmed",
            OutcomeKind::Superseded => "superseded",
            OutcomeKind::Stale => "stale",
            OutcomeKind::Pending => "pending",
            OutcomeKind::Rejected => "rejected",
            OutcomeKind::Removed => "removed",
            OutcomeKind::Error => "error",
        }
    }
}

impl fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one write, as printed by `write` and `apply`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteOutcome {
    pub outcome: OutcomeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Where on its line an `apply` input stopped parsing (in characters), for an `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    pub subject: Option<String>,
    pub predicate: Option<String>,
    /// Canonical scope, or the candidate list for a pending write.
    pub scope: Option<OutcomeScope>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causal_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A revert's: the version whose value it brought back (the default one, when none was
    /// named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted_to: Option<i64>,
    /// A global value the scope guard stored but marked suspect (README, "The scope guard"):
    /// its evidence, as the `set` event's detail keeps it and `memscope suspects` lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect: Option<Vec<String>>,
}

/// Where a write went: one scope (JSON: its text), or the candidates a human must choose
/// between (JSON: `{"ambiguous": [...]}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OutcomeScope {
    Exact(Scope),
    Ambiguous { ambiguous: Vec<Scope> },
}

impl fmt::Display for OutcomeScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutcomeScope::Exact(s) => write!(f, "{s}"),
            OutcomeScope::Ambiguous { .. } => {
                write!(
                    f,
                    "{}",
                    serde_json::to_string(self).map_err(|_| fmt::Error)?
                )
            }
        }
    }
}

impl WriteOutcome {
    /// The outcome of a write of `subject · predicate` to `scope`: the one constructor every
    /// outcome but a refused line's ([`WriteOutcome::error`]) is built with.
    pub fn new(
        outcome: OutcomeKind,
        subject: &str,
        predicate: &str,
        scope: OutcomeScope,
    ) -> WriteOutcome {
        WriteOutcome {
            subject: Some(subject.to_owned()),
            predicate: Some(predicate.to_owned()),
            scope: Some(scope),
            ..WriteOutcome::bare(outcome)
        }
    }

    fn bare(outcome: OutcomeKind) -> WriteOutcome {
        WriteOutcome {
            outcome,
            line: None,
            column: None,
            subject: None,
            predicate: None,
            scope: None,
            version: None,
            value: None,
            previous: None,
            pending_id: None,
            causal_seq: None,
            reason: None,
            error: None,
            reverted_to: None,
            suspect: None,
        }
    }

    pub fn error(line: Option<u64>, message: impl Into<String>) -> WriteOutcome {
        WriteOutcome {
            line,
            error: Some(message.into()),
            ..WriteOutcome::bare(OutcomeKind::Error)
        }
    }

    /// One human line: `superseded user:42 · package_manager @ global v3 (was "pnpm")`.
    pub fn human(&self) -> String {
        if let Some(err) = &self.error {
            return match (self.line, self.column) {
                (Some(l), Some(c)) => format!("error on line {l}, column {c}: {err}"),
                (Some(l), None) => format!("error on line {l}: {err}"),
                (None, _) => format!("error: {err}"),
            };
        }
        let scope = self
            .scope
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let mut s = format!(
            "{} {} · {} @ {}",
            self.outcome,
            self.subject.as_deref().unwrap_or(""),
            self.predicate.as_deref().unwrap_or(""),
            scope
        );
        // A stale write's version is the current one, which holds another value: its reason
        // names it (found by review: `stale … @ global v3 = "npm"` read as if v3 were npm).
        if let Some(v) = self.version.filter(|_| self.outcome != OutcomeKind::Stale) {
            s.push_str(&format!(" v{v}"));
        }
        if let Some(v) = &self.value {
            s.push_str(&format!(" = {}", value_text(v)));
        }
        if let Some(p) = &self.previous {
            s.push_str(&format!(" (was {})", value_text(p)));
        }
        match (self.pending_id, self.outcome) {
            (Some(id), OutcomeKind::Pending) => {
                s.push_str(&format!(" (pending #{id}: a human must choose the scope)"))
            }
            (Some(id), _) => s.push_str(&format!(" (from pending #{id})")),
            (None, _) => {}
        }
        if let Some(r) = &self.reason {
            s.push_str(&format!(" — {r}"));
        }
        if let Some(evidence) = &self.suspect {
            s.push_str(&format!(
                " — marked suspect: {}; if it is one place's rule, `memscope suspects` shows the rescope that moves it",
                evidence.join("; ")
            ));
        }
        s
    }
}

/// A live record of the current view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    pub subject: String,
    pub predicate: String,
    pub scope: Scope,
    pub value: Value,
    pub version: i64,
    pub source: String,
    pub causal_seq: i64,
    pub raw: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub confirmed_at: Option<String>,
    pub confirm_count: i64,
    /// The stored value's size in bytes where `value` holds only its preview (a long value as
    /// the UI lists it: README, "The terminal UI"); `None` where it is whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_bytes: Option<i64>,
    /// Likewise for `raw`: the words' size where `raw` holds only their first characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_bytes: Option<i64>,
}

impl MemoryRecord {
    pub fn identity(&self) -> Identity {
        Identity {
            subject: self.subject.clone(),
            predicate: self.predicate.clone(),
            scope: self.scope.clone(),
        }
    }
}

/// One row of the append-only event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub id: i64,
    pub event: String,
    pub subject: String,
    pub predicate: String,
    pub scope: String,
    pub version: Option<i64>,
    pub value: Option<Value>,
    pub raw: Option<String>,
    pub source: Option<String>,
    pub causal_seq: Option<i64>,
    pub at: String,
    /// Event-specific facts: reason, purged count, pending id …
    pub detail: Option<Value>,
    /// For a `set` event: when the version stopped being current (the next version, delete or
    /// removal); `None` while it is current or for other events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<String>,
    /// The stored value's size in bytes where `value` holds only its preview (the history
    /// pane's reads); `None` where it is whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_bytes: Option<i64>,
    /// Likewise for `raw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_bytes: Option<i64>,
}

/// An ambiguous write waiting for a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingItem {
    pub id: i64,
    pub subject: String,
    pub predicate: String,
    pub value: Value,
    pub raw: Option<String>,
    pub source: String,
    pub causal_seq: i64,
    pub candidates: Vec<Scope>,
    pub status: String,
    pub created_at: String,
    pub resolved_scope: Option<String>,
    pub resolution: Option<String>,
    /// For a value a spelling merge could not place (README, "One spelling per place"): the
    /// identity as it was spelled when it held this value. The item's one candidate is the
    /// scope it belongs to; resolving it makes the value current, rejecting it keeps the
    /// current one. `None` for an ambiguous write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<String>,
    /// Why it waits, when memscope queued it rather than the writer: the scope guard's
    /// evidence (README, "The scope guard").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl PendingItem {
    /// Why this item cannot be resolved: a human closed it already (`None` while it is open).
    /// Said before anything about its scope, which no longer matters.
    pub fn closed_sentence(&self) -> Option<String> {
        (self.status != "open").then(|| {
            format!(
                "pending item #{} is already {} ({}): nothing to do",
                self.id,
                self.status,
                self.resolution.as_deref().unwrap_or("no outcome")
            )
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tombstone {
    pub subject: String,
    pub predicate: String,
    pub scope: Scope,
    pub version: i64,
    pub reason: Option<String>,
    pub deleted_at: String,
}

/// One scope that resolution looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Considered {
    pub scope: String,
    pub found: bool,
    pub value: Option<Value>,
    pub wins: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// `found`, `shadowed`, `absent` or `deleted`.
    pub state: String,
    /// As of a past moment, when a scope that held the identity then was deleted since and its
    /// content destroyed (README, "resolve": the same time `state`'s sentence names), so a
    /// front end words it without reading the sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub found: bool,
    pub subject: String,
    pub predicate: String,
    pub value: Option<Value>,
    pub scope: Option<String>,
    pub version: Option<i64>,
    pub source: Option<String>,
    pub considered: Vec<Considered>,
}

/// One logged read: what resolve returned to an agent. Never a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadRecord {
    pub id: i64,
    pub at: String,
    pub agent: Option<String>,
    pub subject: String,
    pub predicate: String,
    pub repo: Option<String>,
    pub task: Option<String>,
    /// The winning scope, or `None` when nothing applied.
    pub scope: Option<String>,
    pub version: Option<i64>,
    /// Scopes the winner shadowed, as `scope@vN` (the scope alone in a read `alias add`
    /// moved from another name, whose versions those were).
    pub shadowed: Vec<String>,
    pub note: Option<String>,
}

impl ReadRecord {
    /// What the read got, as `reads` and the UI say it: `global v2`, the scope alone when the
    /// log keeps no version (a read `alias add` moved from another name), or `nothing`.
    pub fn got(&self) -> String {
        match (&self.scope, self.version) {
            (Some(s), Some(v)) => format!("{s} v{v}"),
            (Some(s), None) => s.clone(),
            _ => "nothing".into(),
        }
    }
}

/// What a delete targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteTarget {
    Identity(Identity),
    Predicate { subject: String, predicate: String },
    Subject(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TombstoneRef {
    pub subject: String,
    pub predicate: String,
    pub scope: String,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeleteReport {
    pub tombstoned: Vec<TombstoneRef>,
    /// Covered identities that were deleted before, with nothing left of them to destroy: left
    /// as they are — no second `deleted` event, their tombstones (the versions given) unchanged.
    #[serde(default)]
    pub already_deleted: Vec<TombstoneRef>,
    pub purged_versions: i64,
    pub purged_pending: i64,
    /// Read-log notes destroyed with the content they may repeat (the reads stay).
    #[serde(default)]
    pub purged_notes: i64,
    /// History events of other scopes whose content a rescope had moved into a deleted
    /// identity, blanked (the events stay): see [`DeletePreview::moved_copies`].
    #[serde(default)]
    pub blanked_copies: i64,
    /// Sources of the `rejected` and `pending_resolved` events of a covered identity deleted
    /// before, blanked (the events stay): see [`DeletePreview::refused_sources`].
    #[serde(default)]
    pub blanked_sources: i64,
    /// False when an open reader blocked the WAL truncation; the debt is recorded and paid later.
    pub disk_purged: bool,
    /// What the backend tells the user about the disk beyond `disk_purged` (PostgreSQL: what
    /// its vacuum reached and what it cannot, or that only the tables' owner may vacuum them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_note: Option<String>,
    /// memscope's guards on the database are missing or changed (`check`'s `schema_guards`):
    /// a trigger or rule another client added may have kept a copy of what was destroyed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guards_missing: bool,
}

/// What a delete says when [`DeleteReport::guards_missing`].
pub const GUARDS_MISSING_AFTER_DELETE: &str = "memscope's guards on this database are missing or changed (`memscope check` reports schema_guards), so a trigger or rule another client added may have kept a copy of what was deleted: find it with `memscope check` and remove it, then restore the guards (`memscope --db … init`)";

impl DeleteReport {
    /// Whether the delete wrote nothing: everything it covered was already deleted.
    pub fn changed_nothing(&self) -> bool {
        self.tombstoned.is_empty()
            && self.purged_pending == 0
            && self.purged_notes == 0
            && self.blanked_copies == 0
            && self.blanked_sources == 0
    }

    /// What the delete blanked of an identity's content kept outside its purge — copies a
    /// rescope left in other scopes, the sources of refused writes — when it blanked anything.
    pub fn blanked_sentence(&self) -> Option<String> {
        let mut blanked = Vec::new();
        if self.blanked_copies > 0 {
            blanked.push(format!(
                "{} a rescope had left where the value was first written",
                plural(self.blanked_copies, "history event", "history events")
            ));
        }
        if self.blanked_sources > 0 {
            blanked.push(format!(
                "the sources of {} (the events stay)",
                plural(self.blanked_sources, "refused write", "refused writes")
            ));
        }
        (!blanked.is_empty()).then(|| format!("blanked {}", blanked.join(" and ")))
    }
}

impl TombstoneRef {
    /// `id`'s tombstone at `version`.
    pub fn of(id: &Identity, version: i64) -> TombstoneRef {
        TombstoneRef {
            subject: id.subject.clone(),
            predicate: id.predicate.clone(),
            scope: id.scope.to_string(),
            version,
        }
    }

    /// `subject · predicate @ scope (tombstone vN)`, as the front ends name a tombstone.
    pub fn label(&self) -> String {
        format!(
            "{} · {} @ {} (tombstone v{})",
            self.subject, self.predicate, self.scope, self.version
        )
    }
}

/// What a delete would destroy, for a confirm dialog (computed without writing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DeletePreview {
    /// The identities the delete tombstones.
    pub identities: Vec<Identity>,
    /// Covered identities already deleted, with nothing left of them to destroy: the delete
    /// leaves them as they are (see [`DeleteReport::already_deleted`]).
    #[serde(default)]
    pub already_deleted: Vec<Identity>,
    pub live_records: i64,
    pub versions: i64,
    pub raw_texts: i64,
    pub events: i64,
    pub pending_items: i64,
    /// Read-log notes the delete destroys.
    #[serde(default)]
    pub read_notes: i64,
    /// History events of other scopes that keep content a rescope moved into a covered
    /// identity (the version it moved away, where it was first written): the delete blanks
    /// their value and words, even of an identity deleted before (README, "delete, restore, gc").
    #[serde(default)]
    pub moved_copies: i64,
    /// `rejected` and `pending_resolved` events of a covered identity deleted before that keep
    /// a refused write's source (free text, which may repeat what was deleted): the delete
    /// blanks their source and keeps the events (README, "delete, restore, gc"). An identity
    /// deleted now loses those events with the rest of its history.
    #[serde(default)]
    pub refused_sources: i64,
    /// What the delete does past the tables, which the backend decides.
    #[serde(default)]
    pub on_disk: OnDisk,
}

/// What a delete does to the database's files, past its tables (README, "delete, restore, gc";
/// on PostgreSQL, "Running on PostgreSQL").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDisk {
    /// SQLite: freed pages zeroed, the WAL checkpointed and truncated — no copy in any file.
    #[default]
    Files,
    /// PostgreSQL: the touched tables vacuumed, so no row holds the content; the bytes may stay
    /// in the tables' free space, the WAL, replicas and backups until reused or expired.
    Vacuumed,
    /// PostgreSQL, a login that may not VACUUM memscope's tables (only their owner may before
    /// PostgreSQL 17): the dead row versions stay until the owner's VACUUM or autovacuum.
    VacuumOwed,
}

impl OnDisk {
    /// The line a delete's statement says it with (short enough for the UI's dialog).
    pub fn effect(self) -> &'static str {
        match self {
            OnDisk::Files => "• checkpoint and truncate the WAL, so no copy stays in any file",
            OnDisk::Vacuumed => "• vacuum the tables; the WAL and backups may still hold it",
            OnDisk::VacuumOwed => {
                "• leave the vacuum to the tables' owner (this login may not): dead row versions keep it until then"
            }
        }
    }
}

/// How a line of a delete's statement reads, so that each front end can style it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementLine {
    Heading,
    /// One thing the delete does.
    Effect,
    /// An identity the delete tombstones.
    Identity,
    /// What remains afterwards.
    Closing,
}

impl DeletePreview {
    /// Whether the delete would write nothing: every identity it covers is already deleted, and
    /// no pending item or read-log note of the target is left.
    pub fn changes_nothing(&self) -> bool {
        self.identities.is_empty()
            && self.pending_items == 0
            && self.read_notes == 0
            && self.moved_copies == 0
            && self.refused_sources == 0
    }

    /// The statement a delete makes before it is applied, line by line: the UI's delete dialog
    /// and `memscope delete` (`--dry-run`, the confirmation) both print it. `restore_hint` ends the
    /// last sentence with how this front end restores ("(tab 3, u)").
    pub fn statement(&self, restore_hint: &str) -> Vec<(StatementLine, String)> {
        use StatementLine as L;
        if self.changes_nothing() {
            let mut lines = vec![(
                L::Heading,
                "Nothing is left to destroy: already deleted".to_string(),
            )];
            lines.extend(
                self.already_deleted
                    .iter()
                    .map(|id| (L::Identity, format!("    {id}"))),
            );
            lines.push((
                L::Closing,
                format!(
                    "{} content is gone and only a content-free `deleted` event remains; confirming changes nothing. Writes are rejected until restored {restore_hint}.",
                    if self.already_deleted.len() == 1 { "Its" } else { "Their" }
                ),
            ));
            return lines;
        }
        let mut lines = vec![(L::Heading, "This will, in one transaction:".to_string())];
        // Every identity deleted before (a delete run again to blank what an earlier release
        // left): no line for what it does not do — no "tombstone 0 identities".
        let tombstones = !self.identities.is_empty();
        if tombstones {
            let n = self.identities.len() as i64;
            lines.push((
                L::Effect,
                format!("• tombstone {}", plural(n, "identity", "identities")),
            ));
            lines.extend(
                self.identities
                    .iter()
                    .map(|id| (L::Identity, format!("    {id}"))),
            );
        }
        if !self.already_deleted.is_empty() {
            lines.push((
                L::Effect,
                match self.already_deleted.len() {
                    1 => "• skip 1 identity already deleted (its versions are gone already)"
                        .to_string(),
                    n => format!(
                        "• skip {n} identities already deleted (their versions are gone already)"
                    ),
                },
            ));
            if !tombstones {
                lines.extend(
                    self.already_deleted
                        .iter()
                        .map(|id| (L::Identity, format!("    {id}"))),
                );
            }
        }
        let effects = [
            (
                tombstones,
                format!(
                    "• remove {}",
                    plural(self.live_records, "live record", "live records")
                ),
            ),
            (
                tombstones,
                format!(
                    "• destroy {}, {} and {}",
                    plural(self.versions, "version", "versions"),
                    plural(self.raw_texts, "raw text", "raw texts"),
                    plural(self.events, "history event", "history events")
                ),
            ),
            (
                tombstones || self.pending_items > 0,
                format!(
                    "• drop {} of the deleted memories",
                    plural(self.pending_items, "pending item", "pending items")
                ),
            ),
            (
                tombstones || self.read_notes > 0,
                format!(
                    "• blank {} of agents' reads (the reads stay)",
                    plural(self.read_notes, "note", "notes")
                ),
            ),
            (
                self.moved_copies > 0,
                format!(
                    "• blank {} a rescope left where the value was first written",
                    plural(self.moved_copies, "history event", "history events")
                ),
            ),
            (
                self.refused_sources > 0,
                format!(
                    "• blank the sources of {} (the events stay)",
                    plural(self.refused_sources, "refused write", "refused writes")
                ),
            ),
        ];
        lines.extend(
            effects
                .into_iter()
                .filter(|(said, _)| *said)
                .map(|(_, e)| (L::Effect, e)),
        );
        lines.push((L::Effect, self.on_disk.effect().to_string()));
        lines.push((
            L::Closing,
            format!(
                "Only a content-free `deleted` event remains. Later writes to these identities are rejected until restored {restore_hint}."
            ),
        ));
        lines
    }
}

/// 1234567 → "1,234,567".
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// "1 item" / "2 items".
pub fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// `s` as one shell word: unchanged when it needs no quoting, else in single quotes — so a
/// command memscope suggests can be pasted as it is (`memscope --db '/tmp/my db' init`). A
/// word holding a character printed escaped (a control, or one that prints as nothing) is
/// spelled in ANSI-C quotes, `$'z\u200b.db'`, which bash and zsh read back as that very
/// character: in single quotes its printed escape would name another file.
pub fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return s.to_string();
    }
    let Some((chars, escaped)) = escaped_chars(s) else {
        return format!("'{}'", s.replace('\'', "'\\''"));
    };
    let mut out = String::from("$'");
    for (c, escaped) in chars.into_iter().zip(escaped) {
        ansi_c_char(&mut out, c, escaped);
    }
    out.push('\'');
    out
}

/// A path as one shell word ([`shell_word`]). A path that is not UTF-8 is spelled in ANSI-C
/// quotes, its other bytes as `\xHH`, which bash and zsh read back as those very bytes (found
/// by an exploratory test: a hint for such a path printed U+FFFD, naming another file).
pub fn shell_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    if let Some(s) = path.to_str() {
        return shell_word(s);
    }
    let mut out = String::from("$'");
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        let valid = chunk.valid();
        let (chars, escaped) = escaped_chars(valid)
            .unwrap_or_else(|| (valid.chars().collect(), vec![false; valid.chars().count()]));
        for (c, escaped) in chars.into_iter().zip(escaped) {
            ansi_c_char(&mut out, c, escaped);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('\'');
    out
}

/// `c` inside ANSI-C quotes (`$'…'`), spelled as an escape when `escaped`.
fn ansi_c_char(out: &mut String, c: char, escaped: bool) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\'' => out.push_str("\\'"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        c if escaped && u32::from(c) <= 0xFFFF => out.push_str(&format!("\\u{:04x}", u32::from(c))),
        c if escaped => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        c => out.push(c),
    }
}

/// "just now", "45s", "12m", "3h", "4d", "5w", "3mo", "2y" before `now`.
pub fn age(now: chrono::DateTime<chrono::Utc>, at: &str) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(at) else {
        return "?".into();
    };
    let secs = (now - t.with_timezone(&chrono::Utc)).num_seconds();
    if secs < 0 {
        return "future".into();
    }
    let (n, unit) = match secs {
        0..=9 => return "now".into(),
        10..=59 => (secs, "s"),
        60..=3599 => (secs / 60, "m"),
        3600..=86_399 => (secs / 3600, "h"),
        86_400..=1_209_599 => (secs / 86_400, "d"),
        1_209_600..=5_183_999 => (secs / 604_800, "w"),
        5_184_000..=31_535_999 => (secs / 2_592_000, "mo"),
        _ => (secs / 31_536_000, "y"),
    };
    format!("{n}{unit}")
}

/// "4d ago" (or "now").
pub fn ago(now: chrono::DateTime<chrono::Utc>, at: &str) -> String {
    match age(now, at).as_str() {
        "now" => "just now".into(),
        "?" => "at an unknown time".into(),
        "future" => "in the future".into(),
        a => format!("{a} ago"),
    }
}

/// Cuts `s` to at most `max` characters, marking the cut with an ellipsis.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out = whole_clusters(s, 0, max.saturating_sub(1));
    out.push('…');
    out
}

/// The grapheme clusters of `s` that lie wholly within its characters `from..to`: a cut never
/// falls inside an emoji of several code points or a letter and its marks, which would leave a
/// joiner or a modifier on its own beside the `…` (found by review: `👩` and a bare U+200D
/// printed before `…`).
fn whole_clusters(s: &str, from: usize, to: usize) -> String {
    use unicode_segmentation::UnicodeSegmentation;
    let mut out = String::new();
    let mut at = 0;
    for g in s.graphemes(true) {
        let len = g.chars().count();
        if at + len > to {
            break;
        }
        if at >= from {
            out.push_str(g);
        }
        at += len;
    }
    out
}

/// `s` cut to `max` characters as [`shorten`] cuts it — but around the first cue that
/// `evidence` quotes (`the words say “这个仓库”`) when `s` holds it (ASCII case aside), with `…`
/// at each end cut, so a line quoting the evidence shows the words it quotes (found by review:
/// the cue after 10,000 characters was cut off).
pub fn excerpt_with_cue(s: &str, evidence: &str, max: usize) -> String {
    let n = s.chars().count();
    let cue = evidence
        .split_once("the words say “")
        .and_then(|(_, rest)| rest.split_once('”'))
        .map(|(cue, _)| cue.to_ascii_lowercase())
        .filter(|cue| !cue.is_empty());
    let found = cue.as_ref().and_then(|cue| {
        // ASCII lowercasing keeps every byte offset.
        let at = s.to_ascii_lowercase().find(cue.as_str())?;
        Some((s[..at].chars().count(), cue.chars().count()))
    });
    match found {
        Some((at, len)) if n > max && len + 2 <= max => {
            let start = at.saturating_sub((max - len) / 2).min(n - max);
            let end = start + max;
            // Each end cut gives its character to the `…`.
            let (cut_start, cut_end) = (start > 0, end < n);
            let mut out = String::with_capacity(max * 4);
            if cut_start {
                out.push('…');
            }
            out.push_str(&whole_clusters(
                s,
                start + usize::from(cut_start),
                end - usize::from(cut_end),
            ));
            if cut_end {
                out.push('…');
            }
            out
        }
        _ => shorten(s, max),
    }
}

/// The deepest nesting of arrays and objects a stored value may have: what memscope's own
/// readers (serde_json, whose limit is 127 levels) read back. A scalar is 0 levels deep.
pub const MAX_VALUE_DEPTH: usize = 127;

/// How deeply `v` nests arrays and objects (a scalar is 0). Iterative: any depth is safe;
/// a scalar or a flat container costs no allocation (every write asks).
pub fn value_depth(v: &Value) -> usize {
    fn is_container(v: &Value) -> bool {
        matches!(v, Value::Array(_) | Value::Object(_))
    }
    fn children(v: &Value) -> impl Iterator<Item = &Value> {
        let (items, fields) = match v {
            Value::Array(items) => (Some(items.iter()), None),
            Value::Object(map) => (None, Some(map.values())),
            _ => (None, None),
        };
        items
            .into_iter()
            .flatten()
            .chain(fields.into_iter().flatten())
    }
    if !is_container(v) {
        return 0;
    }
    let mut deepest = 1;
    let mut stack: Vec<(&Value, usize)> = children(v)
        .filter(|c| is_container(c))
        .map(|c| (c, 2))
        .collect();
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        stack.extend(
            children(v)
                .filter(|c| is_container(c))
                .map(|c| (c, depth + 1)),
        );
    }
    deepest
}

/// Whether `v` holds a number read as a float anywhere. serde_json reads an integer literal
/// that no 64-bit integer holds as the nearest float, silently: only such a value can have lost
/// digits, so only such a value's text needs [`inexact_number`]. Iterative: any depth is safe.
pub fn has_float(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if n.is_f64() => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    false
}

/// The first number literal of a JSON text that a JSON reader would read as another number,
/// and the byte it starts at: an integer no 64-bit integer holds (below −9223372036854775808
/// or above 18446744073709551615), which a reader rounds to the nearest float —
/// `12345678901234567890123` comes back as `1.2345678901234568e22` — and a number closer to 0
/// than any double but not 0 (`1e-400`, read as `0.0`; found by review, where `1e400` was
/// refused). memscope refuses either rather than store another number than was sent
/// ([`inexact_number_sentence`]). Strings are skipped; the text need not be valid JSON.
pub fn inexact_number(text: &[u8]) -> Option<(usize, &str)> {
    use crate::json_scan::{walk, Byte};
    let number = |b: u8| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9');
    // The number tokens outside strings, as byte ranges.
    let (mut tokens, mut start, mut at) = (Vec::new(), None, 0);
    walk(text, |b, kind, _| {
        match (kind == Byte::Other && number(b), start) {
            (true, None) => start = Some(at),
            (false, Some(s)) => {
                tokens.push(s..at);
                start = None;
            }
            _ => {}
        }
        at += 1;
    });
    tokens.extend(start.map(|s| s..text.len()));
    tokens.into_iter().find_map(|range| {
        // Only ASCII bytes were taken, so the token is text.
        let token = std::str::from_utf8(&text[range.clone()]).unwrap_or("");
        let digits = token.strip_prefix('-').unwrap_or(token);
        let integer = !digits.is_empty() && digits.bytes().all(|d| d.is_ascii_digit());
        let inexact = if integer {
            token.parse::<i64>().is_err() && token.parse::<u64>().is_err()
        } else {
            underflows(token)
        };
        inexact.then_some((range.start, token))
    })
}

/// Whether a float literal reads as 0 though a digit before its exponent is not 0.
fn underflows(token: &str) -> bool {
    let mantissa = token.split(['e', 'E']).next().unwrap_or("");
    token.parse::<f64>().is_ok_and(|f| f == 0.0)
        && mantissa.bytes().any(|d| matches!(d, b'1'..=b'9'))
}

/// The sentence refusing the number literal `literal` ([`inexact_number`]).
pub fn inexact_number_sentence(literal: &str) -> String {
    let shown = shorten(literal, 40);
    if underflows(literal) {
        return format!(
            "the number {shown} is closer to 0 than memscope keeps (a double, down to about 5e-324; a JSON reader would read it as 0): send it as a string, e.g. \"{shown}\", or as 0"
        );
    }
    format!(
        "the integer {shown} is beyond what memscope keeps exactly (integers from -9223372036854775808 to 18446744073709551615; a JSON reader would round it to other digits): send it as a string, e.g. \"{shown}\""
    )
}

/// A character that reorders the text around it on screen (a bidirectional mark, embedding,
/// override or isolate): stored words holding one could show a terminal or a UI something
/// other than what they say ("Trojan Source", CVE-2021-42574). Printed escaped, as controls are.
pub fn reorders_text(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// The line and paragraph separators (U+2028, U+2029): not controls to Unicode, but a
/// terminal draws them as nothing, so a line holding one is a column shorter than memscope
/// counts and what was on screen before shows through (found by an exploratory test: the UI
/// showed another record's words in a value of forty of them). Printed escaped, as controls
/// are.
pub fn separates_lines(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// Whether `c` may be printed escaped: a control character, or one that may print as nothing
/// ([`crate::spelling::prints_as_nothing`] decides with its neighbours).
fn may_be_escaped(c: char) -> bool {
    c.is_control()
        || reorders_text(c)
        || separates_lines(c)
        || crate::spelling::may_print_as_nothing(c)
}

/// Which characters of `s` are printed escaped: controls, direction controls, and those that
/// print as nothing where they stand (a zero-width space; a joiner outside an emoji or a word).
/// `None` when there is none, the common case, found without collecting anything.
pub(crate) fn escaped_chars(s: &str) -> Option<(Vec<char>, Vec<bool>)> {
    if !s.chars().any(may_be_escaped) {
        return None;
    }
    let chars: Vec<char> = s.chars().collect();
    let escaped: Vec<bool> = (0..chars.len())
        .map(|i| {
            let c = chars[i];
            c.is_control()
                || reorders_text(c)
                || separates_lines(c)
                || crate::spelling::prints_as_nothing(&chars, i)
        })
        .collect();
    escaped.contains(&true).then_some((chars, escaped))
}

/// `s` safe to print on a terminal: every control character (C0, DEL, C1), every direction
/// control and every character that prints as nothing where it stands is shown as its Rust
/// escape (`\u{1b}`, `\n`, `\u{202e}`, `\u{200b}`), everything else — CJK, emoji with their
/// joiners — as it is.
pub fn escape_controls(s: &str) -> String {
    let Some((chars, escaped)) = escaped_chars(s) else {
        return s.to_string();
    };
    let mut out = String::with_capacity(s.len() + 8);
    for (c, escaped) in chars.into_iter().zip(escaped) {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else if escaped {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// JSON text of `value`, compact: serde_json's, but DEL, the C1 controls, the direction
/// controls and the characters that print as nothing where they stand are escaped as well
/// (`\u007f`, `\u009b`, `\u202e`, `\u200b`; serde_json escapes only U+0000–U+001F). It
/// parses to the same value, and no such character in it reaches a terminal raw.
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(value).map(escape_json_controls)
}

/// A value as one JSON text for a line a person reads — the write outcome, `list`, `history`,
/// `resolve`, `pending`, `suspects`, the MCP server's sentences: [`to_json`], so a stored ESC
/// shows as `\u001b` and a direction control as `\u202e` — one escape style inside one value,
/// and the text parses back to the value it shows.
pub fn value_text(v: &Value) -> String {
    to_json(v).unwrap_or_else(|_| v.to_string())
}

/// [`to_json`], indented over several lines.
pub fn to_json_pretty<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(value).map(escape_json_controls)
}

/// Outside its strings JSON text is ASCII, and serde_json already escapes C0 inside them: a
/// character left to escape is DEL, C1, a direction control or one that prints as nothing
/// inside a string, where `\uXXXX` means the same.
fn escape_json_controls(json: String) -> String {
    let Some((chars, escaped)) = escaped_chars(&json) else {
        return json;
    };
    let mut out = String::with_capacity(json.len() + 16);
    for (c, escaped) in chars.into_iter().zip(escaped) {
        // C0 here is the layout of pretty JSON (newlines), outside every string.
        if escaped && c > '\u{1f}' {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", unit));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The comparison form of a value: strings trimmed, case folded, inner whitespace collapsed;
/// numbers by their value (`1`, `1.0` and `1e0` are one number, `-0` is `0`); object keys
/// unordered (serde_json's map is sorted).
pub fn value_key(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::Number(number_key(n)),
        Value::String(s) => Value::String(string_key(s)),
        Value::Array(items) => Value::Array(items.iter().map(value_key).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), value_key(v))).collect())
        }
        other => other.clone(),
    }
}

/// A string's comparison form: trimmed, inner whitespace collapsed, composed (NFC: `e` and a
/// combining acute are `é`, as an input method on macOS may type it) and in lower case, `ß`
/// as `ss` (its upper case, `STRASSE`). Found by review: `café` typed decomposed, and
/// `STRASSE` over `straße`, were new versions that printed like the old.
fn string_key(s: &str) -> String {
    let spaced = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if spaced.is_ascii() {
        return spaced.to_ascii_lowercase();
    }
    use unicode_normalization::UnicodeNormalization;
    spaced
        .nfc()
        .collect::<String>()
        .to_lowercase()
        .replace('ß', "ss")
}

/// A number in one form per value: a float with no fraction that an integer type holds exactly
/// becomes that integer, so it equals the integer spelled without a fraction.
fn number_key(n: &serde_json::Number) -> serde_json::Number {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 => {
            if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
                serde_json::Number::from(f as i64)
            } else if (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                serde_json::Number::from(f as u64)
            } else {
                n.clone()
            }
        }
        _ => n.clone(),
    }
}

pub fn same_value(a: &Value, b: &Value) -> bool {
    value_key(a) == value_key(b)
}

/// Whether `a` and `b` are spelled alike: strings exactly, numbers by value (`1`, `1.0` and
/// `1e0` are one number however written, which no spelling correction changes), arrays and
/// objects element by element. What `write --respell` compares.
pub fn same_spelling(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => same_value(a, b),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_spelling(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_spelling(v, w)))
        }
        _ => a == b,
    }
}

/// Predicate normal form before aliasing: trimmed, camelCase split, lower-cased, spaces,
/// hyphens and dots to `_`, repeats collapsed.
pub fn normalize_predicate(raw: &str) -> Result<String, String> {
    // Most names are stored ones, already in normal form and ASCII: they are their own normal
    // form, without a normalizer (`check` holds millions of stored predicates to this).
    if is_normal_ascii_predicate(raw) {
        return Ok(raw.to_owned());
    }
    normalize_predicate_in_full(raw)
}

/// Whether `raw` is ASCII that [`normalize_predicate`] leaves as it is: no upper case letter,
/// control character or separator but single `_` between other characters.
fn is_normal_ascii_predicate(raw: &str) -> bool {
    let b = raw.as_bytes();
    !b.is_empty()
        && b.first() != Some(&b'_')
        && b.last() != Some(&b'_')
        && b.iter().all(|&c| {
            c.is_ascii()
                && !c.is_ascii_control()
                && !c.is_ascii_uppercase()
                && !matches!(c, b' ' | b'-' | b'.' | b'/')
        })
        && !b.windows(2).any(|w| w == b"__")
}

/// [`normalize_predicate`] without its shortcut.
fn normalize_predicate_in_full(raw: &str) -> Result<String, String> {
    if raw.chars().any(char::is_control) {
        return Err(
            "predicate contains control characters: use a plain name like package_manager".into(),
        );
    }
    let raw = crate::spelling::readable_id("predicate", raw.trim())?;
    let mut out = String::with_capacity(raw.len() + 4);
    let mut prev: Option<char> = None;
    for c in raw.chars() {
        let sep = c.is_whitespace() || c == '-' || c == '.' || c == '_' || c == '/';
        if sep {
            out.push('_');
        } else {
            // camelCase boundary: only a letter that really lowercases starts a new word, so
            // normalizing twice gives the same name (ℂ, 𝐀 have no lowercase form).
            let lowers = c.is_uppercase() && c.to_lowercase().ne(std::iter::once(c));
            if lowers {
                if let Some(p) = prev {
                    if p.is_lowercase() || p.is_ascii_digit() {
                        out.push('_');
                    }
                }
            }
            out.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    let mut collapsed = String::with_capacity(out.len());
    for c in out.chars() {
        if c == '_' && (collapsed.is_empty() || collapsed.ends_with('_')) {
            continue;
        }
        collapsed.push(c);
    }
    while collapsed.ends_with('_') {
        collapsed.pop();
    }
    if collapsed.is_empty() && !raw.trim().is_empty() {
        return Err(format!(
            "predicate '{}' has no letter or digit: name what the memory is about, e.g. package_manager",
            shorten(raw.trim(), 40)
        ));
    }
    if collapsed.is_empty() {
        return Err(
            "predicate is empty: name what the memory is about, e.g. package_manager".into(),
        );
    }
    // Separators stripped from the front may have held up a combining mark.
    crate::spelling::starts_on_a_letter("predicate", &collapsed)?;
    Ok(collapsed)
}

/// A subject is any non-empty trimmed text without control characters.
pub fn normalize_subject(raw: &str) -> Result<String, String> {
    let t = raw.trim();
    if t.is_empty() {
        return Err("subject is empty: name who the memory is about, e.g. user:42".into());
    }
    if t.chars().any(|c| c.is_control()) {
        return Err("subject contains control characters: use plain text like user:42".into());
    }
    crate::spelling::readable_id("subject", t)
}

/// An agent's name as a person gives it (`resolve --log --agent`, `mcp --agent`): trimmed, not
/// empty, no control characters. The error is the rest of a sentence whose start names where
/// the name came from (`--agent must be …`).
pub fn agent_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(
            "must be a plain name such as claude-code, not empty or with control characters".into(),
        );
    }
    Ok(name.to_string())
}

/// Refuses a NUL character in free text memscope keeps (a read's note, a delete's reason, the
/// user's words): PostgreSQL's text cannot hold one, so a database holding it could not move
/// there (README, "export / import"). `what` names the text (`the delete's reason`).
pub fn refuse_nul(what: &str, text: &str) -> Result<(), InvalidRequest> {
    if text.contains('\0') {
        return Err(InvalidRequest(format!(
            "{what} contains a NUL character, which memscope does not store: pass the text without it"
        )));
    }
    Ok(())
}

/// The most bytes of UTF-8 a subject, a predicate or a scope's id may hold (README, "The model
/// in one minute"). PostgreSQL keeps a b-tree entry to about 2,700 bytes and indexes an identity
/// whole (`memories`, `history`, `tombstones`); three parts of 512 bytes fit uncompressed with
/// room to spare, and so does a spelling key, the folded id ([`crate::spelling::fold`]: lower
/// case makes UTF-8 at most half as long again, `İ` → `i̇`). One limit on both backends, so a
/// database written on one moves to the other.
pub const MAX_ID_BYTES: usize = 512;

/// Refuses a `what` (`subject`, `predicate`, `scope id` …) longer than [`MAX_ID_BYTES`], in
/// one sentence. Only what a write names is held to it: ids stored before the limit stay
/// readable and are not in normal form's rules (`check` counts them apart).
pub fn within_id_limit(what: &str, id: &str) -> Result<(), String> {
    match past_id_limit(what, id) {
        Some(said) => Err(format!("{said}: shorten it")),
        None => Ok(()),
    }
}

/// What [`within_id_limit`] says of an id past the limit, without the advice: `subject is
/// 3,002 bytes long; memscope keeps …`. `None` within it.
pub fn past_id_limit(what: &str, id: &str) -> Option<String> {
    (id.len() > MAX_ID_BYTES).then(|| {
        format!(
            "{what} is {} bytes long; memscope keeps subjects, predicates and scope ids to at most {MAX_ID_BYTES} bytes of UTF-8 (about 170 Chinese characters)",
            thousands(id.len() as i64)
        )
    })
}

/// What `check` says of a database holding `n` identities or aliases past the id limit.
pub fn ids_past_limit_sentence(n: i64) -> String {
    format!(
        "{} {} a subject, predicate or scope id longer than the {MAX_ID_BYTES} bytes memscope keeps (written before the limit): {} readable here, but the database cannot move to PostgreSQL, whose import refuses {} — write each again under a shorter name and delete the old one (remove such an alias)",
        thousands(n),
        if n == 1 { "identity or alias names" } else { "identities or aliases name" },
        if n == 1 { "it stays" } else { "they stay" },
        if n == 1 { "it" } else { "them" },
    )
}

/// The empty string and every string of 1 to `up_to` characters over `alphabet`: what a test
/// feeds a shortcut and the full path it skips, to hold them to one answer.
#[cfg(test)]
pub(crate) fn every_string(alphabet: &[char], up_to: usize) -> Vec<String> {
    let mut texts = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..up_to {
        let next: Vec<String> = last
            .iter()
            .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
            .collect();
        texts.extend(next.iter().cloned());
        last = next;
    }
    texts
}

/// `text` with each `%XX` read as the byte it encodes, when the bytes are UTF-8; else as written.
pub(crate) fn percent_decoded(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('%') {
        return text.into();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    match String::from_utf8(out) {
        Ok(decoded) => decoded.into(),
        Err(_) => text.into(),
    }
}

#[cfg(test)]
mod tests {
    /// A cut keeps whole clusters: an emoji of several code points joined (`👩‍💻`), a flag, a
    /// letter and its mark — never a bare joiner or modifier beside the `…` — at the end
    /// (`shorten`) and at both ends of an excerpt around a cue.
    #[test]
    fn a_cut_never_splits_a_grapheme_cluster() {
        use unicode_segmentation::UnicodeSegmentation;
        let whole = |cut: &str, of: &str| {
            let inner = cut.trim_matches('…');
            assert!(of.contains(inner), "{cut:?} is a piece of the text");
            let clusters: Vec<&str> = of.graphemes(true).collect();
            for g in inner.graphemes(true) {
                assert!(clusters.contains(&g), "{g:?} of {cut:?} is a whole cluster");
            }
        };
        let worker = "x".to_string() + &"👩‍💻".repeat(60);
        for max in 2..40 {
            let cut = shorten(&worker, max);
            assert!(cut.chars().count() <= max && cut.ends_with('…'), "{cut:?}");
            whole(&cut, &worker);
            assert!(!cut.contains("\u{200d}…"), "{cut:?}");
        }
        let mixed = "🇯🇵🧑🏿‍🚀é".repeat(40);
        for max in 2..40 {
            whole(&shorten(&mixed, max), &mixed);
        }
        let words = "很长的前言🦀👩‍💻".repeat(300) + "这个仓库用 pnpm" + &"尾巴👩‍💻".repeat(300);
        for max in 12..60 {
            let cut = excerpt_with_cue(&words, "the words say “这个仓库”", max);
            assert!(cut.contains("这个仓库"), "{cut:?}");
            assert!(cut.starts_with('…') && cut.ends_with('…'), "{cut:?}");
            assert!(cut.chars().count() <= max, "{cut:?}");
            whole(&cut, &words);
        }
    }

    use super::*;

    #[test]
    fn a_scope_without_an_id_is_shown_an_example_of_its_kind() {
        let said = |t: &str| Scope::parse(t).unwrap_err();
        assert_eq!(
            said("task:"),
            "scope 'task:' has no id: write it as task:<id>, e.g. task:fix-lockfile-123"
        );
        assert_eq!(
            said("Repo："),
            "scope 'Repo:' has no id: write it as Repo:<id>, e.g. Repo:legacy-dashboard"
        );
        assert_eq!(said("global:"), "global takes no id: write global");
        assert_eq!(
            said("galaxy:"),
            "unknown scope 'galaxy:': use global, repo:<id> or task:<id>"
        );
    }

    #[test]
    fn predicate_shortcut_answers_as_the_full_path_does() {
        // Every string of up to four characters over ASCII letters of both cases, digits,
        // each separator, controls, and a few that are not ASCII (Chinese, an accented
        // letter, a combining mark, an emoji, an invisible one).
        let alphabet = [
            'a', 'Z', '7', '_', '-', '.', '/', ' ', '\t', '\u{0}', '\u{7F}', ':', '中', 'é',
            '\u{301}', '😀', '\u{200B}',
        ];
        let mut texts = every_string(&alphabet, 4);
        texts.extend(
            [
                "package_manager",
                "packageManager",
                "reply_language",
                "a__b",
                "_x",
                "x_",
            ]
            .map(String::from),
        );
        for text in &texts {
            assert_eq!(
                normalize_predicate(text),
                normalize_predicate_in_full(text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn an_excerpt_shows_the_cue_its_evidence_quotes() {
        use super::excerpt_with_cue;
        let long = format!(
            "{}这个仓库 keeps npm{}",
            "长".repeat(10_000),
            "尾".repeat(50)
        );
        let ev = "the words say “这个仓库”";
        let cut = excerpt_with_cue(&long, ev, 40);
        assert_eq!(cut.chars().count(), 40, "{cut}");
        assert!(
            cut.contains("这个仓库") && cut.starts_with('…') && cut.ends_with('…'),
            "{cut}"
        );
        // English cues match whatever the case; near the end the window ends with the words.
        let tail = format!("{} This Repo only", "x".repeat(500));
        let cut = excerpt_with_cue(&tail, "the words say “this repo”", 30);
        assert!(
            cut.ends_with("This Repo only") && cut.starts_with('…'),
            "{cut}"
        );
        // Short words, no cue, or a cue the words lack: as shorten cuts them.
        assert_eq!(excerpt_with_cue("短", ev, 40), "短");
        assert_eq!(excerpt_with_cue(&long, "", 5), "长长长长…");
        assert_eq!(
            excerpt_with_cue(&long, "the words say “别处”", 5),
            "长长长长…"
        );
    }

    #[test]
    fn shell_words_paste_as_one_argument() {
        assert_eq!(
            shell_word("/home/me/.local/memory.db"),
            "/home/me/.local/memory.db"
        );
        assert_eq!(shell_word("/tmp/my db"), "'/tmp/my db'");
        assert_eq!(shell_word("it's.db"), "'it'\\''s.db'");
        assert_eq!(shell_word("$HOME;rm"), "'$HOME;rm'");
        assert_eq!(shell_word(""), "''");
        // What prints escaped is spelled so the shell reads back the very character.
        assert_eq!(shell_word("z\u{200B}.db"), "$'z\\u200b.db'");
        assert_eq!(
            shell_word("a'b\\\u{1b}[2J\n仓库"),
            "$'a\\'b\\\\\\u001b[2J\\n仓库'"
        );
        assert_eq!(shell_word("x\u{E0041}"), "$'x\\U000e0041'");
    }

    #[test]
    fn a_path_that_is_not_utf8_pastes_as_its_very_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let bytes: &[u8] = b"/tmp/\xffa b'\xc3\x28\xe4\xbb\x93.db";
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(bytes));
        let word = shell_path(path);
        assert_eq!(word, "$'/tmp/\\xffa b\\'\\xc3(\u{4ed3}.db'");
        assert!(!word.contains('\u{FFFD}'), "{word}");
        // bash reads it back as the very bytes.
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("printf %s {word}"))
            .output()
            .expect("bash runs");
        assert_eq!(out.stdout, bytes);
        assert_eq!(
            shell_path(std::path::Path::new("/tmp/my db")),
            "'/tmp/my db'"
        );
    }

    #[test]
    fn floats_come_back_as_the_same_double() {
        // Without serde_json's float_roundtrip about one float in ten was read one unit off.
        for text in [
            "0.9097040631431023",
            "907130.1334386505",
            "1.5e-300",
            "9007199254740993.0",
            "2.2250738585072014e-308",
            "1.7976931348623157e308",
        ] {
            let want: f64 = text.parse().unwrap();
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(v.as_f64().unwrap().to_bits(), want.to_bits(), "{text}");
            let back: Value = serde_json::from_str(&v.to_string()).unwrap();
            assert_eq!(back, v, "{text}");
        }
    }

    #[test]
    fn inexact_numbers_are_found_outside_strings_only() {
        let found = |t: &str| inexact_number(t.as_bytes()).map(|(at, lit)| (at, lit.to_string()));
        // The ends of the 64-bit integers are exact; one past them is not.
        assert_eq!(found("[18446744073709551615, -9223372036854775808]"), None);
        assert_eq!(
            found("[18446744073709551616]"),
            Some((1, "18446744073709551616".into()))
        );
        assert_eq!(
            found("{\"a\":-9223372036854775809}"),
            Some((5, "-9223372036854775809".into()))
        );
        // Floats, exponents and numbers inside strings (escaped quotes too) are not integers.
        assert_eq!(found("[1e400, 123456789012345678901.5, 1E+30]"), None);
        assert_eq!(
            found(r#"["99999999999999999999", "a\"99999999999999999999"]"#),
            None
        );
        assert_eq!(
            found(r#"{"k\\":99999999999999999999}"#),
            Some((7, "99999999999999999999".into())),
            "a string ending in an escaped backslash ends there"
        );
        assert_eq!(found("-"), None);
        // A number no double holds but 0 reads as 0: refused, as found by review. 0 spelled
        // any way, the smallest double and a number whose digits after the point are 0 are not.
        for zero in [
            "0.0",
            "-0",
            "0e-999",
            "0.000e5",
            "-0.0E-400",
            "5e-324",
            "1e-300",
        ] {
            assert_eq!(found(&format!("[{zero}]")), None, "{zero}");
        }
        assert_eq!(found("[0, 1e-400]"), Some((4, "1e-400".into())));
        assert_eq!(found("{\"x\": -2.5E-999}"), Some((6, "-2.5E-999".into())));
        assert_eq!(found("[0.00001e-330]"), Some((1, "0.00001e-330".into())));
        assert!(inexact_number_sentence("1e-400").contains("closer to 0"));
        // serde_json reads such a literal as a float, which is what has_float sees.
        let v: Value = serde_json::from_str("[1, {\"n\": 18446744073709551616}]").unwrap();
        assert!(has_float(&v));
        let v: Value = serde_json::from_str("[1, {\"n\": 18446744073709551615}]").unwrap();
        assert!(!has_float(&v));
        // A write request is refused at the literal's column, in characters.
        let line = r#"{"subject":"用户:1","predicate":"id","value":[12345678901234567890123],"scope":"global","source":"t"}"#;
        let e = WriteRequest::from_json_line(line).unwrap_err();
        assert!(
            e.message
                .contains("the integer 12345678901234567890123 is beyond"),
            "{}",
            e.message
        );
        assert!(e.message.contains("send it as a string"), "{}", e.message);
        assert_eq!(
            e.column,
            Some(line[..line.find("123").unwrap()].chars().count() as u64 + 1)
        );
    }

    #[test]
    fn value_depth_counts_containers_at_any_depth() {
        assert_eq!(value_depth(&serde_json::json!("x")), 0);
        assert_eq!(value_depth(&serde_json::json!([])), 1);
        assert_eq!(value_depth(&serde_json::json!([1, [2], {"a": 3}])), 2);
        assert_eq!(
            value_depth(&serde_json::json!({"a": [{"b": 1}], "c": []})),
            3
        );
        let mut deep = serde_json::json!(1);
        for _ in 0..10_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        assert_eq!(value_depth(&deep), 10_000);
        // Dropping a Value this deep recurses; unwind it by hand.
        while let serde_json::Value::Array(mut items) = deep {
            deep = items.pop().unwrap_or_default();
        }
    }
    use serde_json::json;

    #[test]
    fn ids_are_held_to_512_bytes_of_utf8() {
        // At the limit and one byte past it, in ASCII, Chinese (3 bytes) and emoji (4).
        for (unit, n) in [("a", 512), ("长", 170), ("😀", 128)] {
            let at = unit.repeat(n);
            assert!(at.len() <= MAX_ID_BYTES && at.len() + unit.len() > MAX_ID_BYTES);
            assert_eq!(within_id_limit("subject", &at), Ok(()));
            let past = format!("{at}{}", "x".repeat(MAX_ID_BYTES + 1 - at.len()));
            assert_eq!(past.len(), MAX_ID_BYTES + 1);
            assert_eq!(
                within_id_limit("subject", &past).unwrap_err(),
                "subject is 513 bytes long; memscope keeps subjects, predicates and scope ids to at most 512 bytes of UTF-8 (about 170 Chinese characters): shorten it"
            );
            assert!(Scope::Repo(at.clone()).within_id_limit().is_ok());
            assert!(Scope::Task(past.clone())
                .within_id_limit()
                .unwrap_err()
                .starts_with("scope id is 513 bytes long;"));
        }
        assert!(within_id_limit("predicate", &"长".repeat(100_000))
            .unwrap_err()
            .starts_with("predicate is 300,000 bytes long;"));
        assert_eq!(Scope::Global.within_id_limit(), Ok(()));
    }

    #[test]
    fn scopes_parse_and_print_canonically() {
        assert_eq!(Scope::parse("global").unwrap(), Scope::Global);
        assert_eq!(
            Scope::parse(" repo:legacy-dashboard ").unwrap().to_string(),
            "repo:legacy-dashboard"
        );
        assert_eq!(
            Scope::parse("task:修复-1").unwrap(),
            Scope::Task("修复-1".into())
        );
        assert!(Scope::parse("repo:").unwrap_err().contains("no id"));
        assert!(Scope::parse("galaxy:x")
            .unwrap_err()
            .contains("unknown scope"));
        assert!(Scope::parse("repo:a b").is_err());
        assert!(Scope::parse("").is_err());
    }

    #[test]
    fn context_ids_take_their_own_scope_form_and_refuse_the_other() {
        use ContextKind::{Repo, Task};
        assert_eq!(parse_context_id(Repo, "web-app").unwrap(), "web-app");
        assert_eq!(parse_context_id(Repo, " repo:web-app ").unwrap(), "web-app");
        assert_eq!(parse_context_id(Task, "task:fix-1").unwrap(), "fix-1");
        // Only the scope prefix is taken off: other colons belong to the id.
        assert_eq!(parse_context_id(Repo, "acme:web").unwrap(), "acme:web");
        assert_eq!(parse_context_id(Repo, "repository").unwrap(), "repository");
        let err = parse_context_id(Repo, "task:fix-1").unwrap_err();
        assert!(err.contains("is a task, not a repository"), "{err}");
        let err = parse_context_id(Task, "repo:web-app").unwrap_err();
        assert!(err.contains("is a repository, not a task"), "{err}");
        assert!(parse_context_id(Repo, "repo:")
            .unwrap_err()
            .contains("no id"));
        assert!(parse_context_id(Task, "two words").is_err());
        // The kind typed in another case is still the kind; the id keeps its own case.
        assert_eq!(parse_context_id(Repo, "Repo:Web-App").unwrap(), "Web-App");
        assert_eq!(parse_context_id(Task, "TASK:修-1").unwrap(), "修-1");
        let err = parse_context_id(Repo, "Task:fix-lockfile-123").unwrap_err();
        assert!(err.contains("is a task, not a repository"), "{err}");
        assert_eq!(parse_context_id(Repo, "仓库:x").unwrap(), "仓库:x");
    }

    #[test]
    fn predicates_normalize_to_one_form() {
        for p in [
            "Package Manager",
            "package-manager",
            "packageManager",
            " package..manager_ ",
        ] {
            assert_eq!(normalize_predicate(p).unwrap(), "package_manager", "{p}");
        }
        assert_eq!(normalize_predicate("包管理器").unwrap(), "包管理器");
        assert_eq!(normalize_predicate("HTTPServer").unwrap(), "httpserver");
        for p in ["Aℂ", "aℂ", "ǅℂ", "Xϒ", "B𝐀", "fooBar", "İstanbul"] {
            let once = normalize_predicate(p).unwrap();
            assert_eq!(normalize_predicate(&once).unwrap(), once, "{p}");
        }
        assert!(normalize_predicate(" -_. ").is_err());
        assert_eq!(
            normalize_predicate("---").unwrap_err(),
            "predicate '---' has no letter or digit: name what the memory is about, e.g. package_manager"
        );
        assert!(normalize_predicate("  ")
            .unwrap_err()
            .starts_with("predicate is empty"));
    }

    #[test]
    fn values_compare_loosely_but_keep_spelling() {
        assert!(same_value(&json!(" PNPM "), &json!("pnpm")));
        assert!(same_value(&json!("npm  ci"), &json!("NPM ci")));
        assert!(!same_value(&json!("npm"), &json!("pnpm")));
        // Composed or not, `ß` or `SS`, Greek's final sigma: one value (found by review).
        assert!(same_value(&json!("café"), &json!("cafe\u{301}")));
        assert!(same_value(&json!("straße"), &json!("STRASSE")));
        assert!(same_value(&json!("Ὀδυσσεύς ΣΑΣ"), &json!("ὀδυσσεύς σας")));
        assert!(same_value(
            &json!(["Café 中文"]),
            &json!(["CAFE\u{301} 中文"])
        ));
        assert!(!same_value(&json!("cafe"), &json!("café")));
        // Numbers by value: one number however it is spelled, exactly past 2^53.
        let num = |t: &str| serde_json::from_str::<Value>(t).unwrap();
        assert!(same_value(&num("1"), &num("1.0")));
        assert!(same_value(&num("[1e2, -0]"), &num("[100, 0.0]")));
        assert!(same_value(&num("{\"n\": 3}"), &num("{\"n\": 3.0}")));
        assert!(!same_value(&num("1"), &num("1.5")));
        assert!(!same_value(&num("1"), &num("\"1\"")));
        assert!(!same_value(
            &num("9007199254740993"),
            &num("9007199254740992.0")
        ));
        assert!(same_value(
            &num("18446744073709551615"),
            &num("18446744073709551615")
        ));
        assert!(same_value(
            &json!({"a": "X", "b": 1}),
            &json!({"b": 1, "a": "x"})
        ));
    }

    #[test]
    fn text_and_json_show_control_characters_escaped() {
        let hostile = "中文🧠\x1b]0;t\x07\u{9b}2J\r\u{85}\x7f\t\n";
        assert_eq!(
            escape_controls(hostile),
            "中文🧠\\u{1b}]0;t\\u{7}\\u{9b}2J\\r\\u{85}\\u{7f}\\t\\n"
        );
        let value = json!({ hostile: [hostile] });
        for text in [to_json(&value).unwrap(), to_json_pretty(&value).unwrap()] {
            assert!(
                !text.contains(|c: char| c.is_control() && c != '\n'),
                "{text:?}"
            );
            assert!(text.contains("中文🧠\\u001b]0;t\\u0007\\u009b2J\\r\\u0085\\u007f"));
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
        assert_eq!(to_json("npm").unwrap(), "\"npm\"");
    }

    #[test]
    fn text_and_json_show_direction_controls_escaped() {
        // Trojan Source: the override makes "npm ci" after it display reversed.
        let hostile = "use \u{202E}ic mpn\u{202C} \u{2066}仓库\u{2069}\u{200F}\u{061C}";
        assert_eq!(
            escape_controls(hostile),
            "use \\u{202e}ic mpn\\u{202c} \\u{2066}仓库\\u{2069}\\u{200f}\\u{61c}"
        );
        let value = json!({ hostile: [hostile] });
        for text in [to_json(&value).unwrap(), to_json_pretty(&value).unwrap()] {
            assert!(!text.contains(reorders_text), "{text:?}");
            assert!(text.contains("use \\u202eic mpn\\u202c \\u2066仓库\\u2069\\u200f\\u061c"));
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
        // Joiners inside words and emoji are not direction controls: shown as they are.
        assert_eq!(escape_controls("👩\u{200D}💻"), "👩\u{200D}💻");
    }

    #[test]
    fn text_and_json_show_line_separators_escaped() {
        let hostile = format!("b{}.仓库", "\u{2028}".repeat(40) + "\u{2029}");
        let shown = escape_controls(&hostile);
        assert!(!shown.contains(separates_lines), "{shown:?}");
        assert!(shown.starts_with("b\\u{2028}\\u{2028}") && shown.ends_with("\\u{2029}.仓库"));
        let value = json!({ &hostile: [&hostile] });
        for text in [to_json(&value).unwrap(), to_json_pretty(&value).unwrap()] {
            assert!(!text.contains(separates_lines), "{text:?}");
            assert!(text.contains("b\\u2028\\u2028"), "{text}");
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
    }

    #[test]
    fn text_and_json_show_what_prints_as_nothing_escaped() {
        // "pnpm" and "pnpm" + a zero-width space are two values; printed, they must differ.
        assert_eq!(escape_controls("pnpm\u{200B}"), "pnpm\\u{200b}");
        assert_eq!(
            escape_controls("p\u{00AD}npm \u{FEFF}仓库\u{2060} x\u{E0041}"),
            "p\\u{ad}npm \\u{feff}仓库\\u{2060} x\\u{e0041}"
        );
        // A joiner or variation selector outside a word prints as nothing; inside an emoji or
        // a word it is part of it, and stays.
        assert_eq!(escape_controls("npm\u{200D} ci"), "npm\\u{200d} ci");
        let kept = "👩\u{200D}💻 ❤\u{FE0F} 🏴\u{E0067}\u{E0062}\u{E007F}";
        assert_eq!(escape_controls(kept), kept);
        let value = json!({ "v": ["pnpm\u{200B}", kept, "x\u{E0041}"] });
        for text in [to_json(&value).unwrap(), to_json_pretty(&value).unwrap()] {
            assert!(text.contains("pnpm\\u200b"), "{text:?}");
            assert!(text.contains(kept), "{text:?}");
            // Outside the first plane, the escape is a surrogate pair, as JSON spells it.
            assert!(text.contains("x\\udb40\\udc41"), "{text:?}");
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
    }

    #[test]
    fn ambiguous_needs_two_distinct_candidates() {
        assert!(ScopeChoice::parse_candidates("global,global").is_err());
        assert!(ScopeChoice::parse_candidates("global").is_err());
        assert!(ScopeChoice::parse_candidates("repo:Web-App,repo:web-app").is_err());
        assert!(ScopeChoice::parse_candidates("global,repo:web-app").is_ok());
        assert!(ScopeChoice::parse_candidates("global, repo:web-app").is_ok());
        for typo in [
            "global,,repo:web-app",
            "global,repo:web-app,",
            ",global,repo:a",
            ",",
        ] {
            let e = ScopeChoice::parse_candidates(typo).unwrap_err();
            assert!(e.contains("is empty"), "{typo}: {e}");
        }
        let r = WriteRequest::from_json_line(
            r#"{"subject":"u","predicate":"p","value":"v","scope":{"ambiguous":["global"]},"source":"s"}"#,
        );
        assert!(r.unwrap_err().message.contains("two distinct"));
    }
}
