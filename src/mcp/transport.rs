//! The stdio transport: one JSON-RPC message per line in, one per line out — with memscope's
//! own framing checks, so that every request gets an answer (README, "MCP server").
//!
//! rmcp's stdio transport drops a line it cannot parse without a word. Two kinds of request
//! were lost that way while the host waited forever for their id: a `remember` whose value is
//! nested deeper than serde_json's recursion limit (127 levels, counting the message's own
//! three), and a `tools/call` whose `arguments` is not an object (answered "method not
//! found"). Here a reader thread frames and checks each line and answers those itself —
//! a tool error naming the depth limit, or "invalid params" — through the same writer that
//! carries rmcp's answers, so lines never interleave.

use super::tools::type_name;
use crate::json_scan::{nesting, walk, Byte, Walker};
use crate::model::MAX_VALUE_DEPTH;
use futures::channel::mpsc;
use rmcp::model::{
    CallToolResult, ClientNotification, ClientRequest, ContentBlock, ErrorData, JsonRpcMessage,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::RoleServer;
use serde_json::Value;
use std::io::{BufRead, Write};

/// Longest line read, as rmcp's own transport: a peer that never ends a line cannot fill
/// memory.
const MAX_LINE: usize = 16 << 20;

/// The deepest message a value of [`MAX_VALUE_DEPTH`] levels arrives in: message → params →
/// arguments → value.
pub const MAX_FRAME_DEPTH: usize = MAX_VALUE_DEPTH + 3;

/// What one line of input comes to.
#[derive(Debug)]
pub enum Frame {
    /// A message for rmcp to handle.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// A request answered here, without rmcp.
    Answer(Box<ServerJsonRpcMessage>),
    /// Nothing to answer (not JSON, or a notification): the reason goes to the log.
    Ignore(String),
}

/// Frames one line (without its newline): one message, or — a JSON-RPC batch, which protocol
/// 2025-03-26 lets a client send — each message of the batch, served and answered on its own
/// line (README, "Agents: memscope as an MCP server").
pub fn frames(line: &[u8]) -> Vec<Frame> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(items) = batch_items(line) else {
        return vec![frame(line)];
    };
    // A batch is run only whole: one that is not JSON (cut off, or with text after it) runs
    // nothing and gets one parse error, as JSON-RPC says. Its messages' own contents are
    // judged by their framing below (depth, numbers, shape), so its top two levels decide.
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&flatten_below(line, 2)) {
        return vec![answer_error(
            ErrorData::parse_error(
                format!("the batch is not valid JSON ({e}), so none of its requests ran: send it again whole"),
                None,
            ),
            None,
        )];
    }
    if items.is_empty() {
        return vec![answer_error(
            ErrorData::invalid_request(
                "the batch is empty: send each request as a JSON object, or a batch of them",
                None,
            ),
            None,
        )];
    }
    items
        .into_iter()
        .map(|item| match item.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => frame(item),
            // `[1]`, `["x"]`, a batch inside a batch: no request, so no id to answer by.
            _ => answer_error(
                ErrorData::invalid_request(
                    "a batch holds request objects only (not a value, nor a batch inside a batch): send each request as a JSON object",
                    None,
                ),
                None,
            ),
        })
        .collect()
}

/// The messages of a batch — a line whose top level is an array — each its own text, cut at
/// the array's top-level commas; `None` for a line that is not an array.
fn batch_items(line: &[u8]) -> Option<Vec<&[u8]>> {
    let start = line.iter().position(|b| !b.is_ascii_whitespace())?;
    if line[start] != b'[' {
        return None;
    }
    let (mut items, mut from, mut end) = (Vec::new(), start + 1, None);
    let mut i = 0;
    walk(line, |b, kind, depth| {
        if end.is_none() && depth == 1 && i > start {
            match (kind, b) {
                (Byte::Other, b',') => {
                    items.push(&line[from..i]);
                    from = i + 1;
                }
                (Byte::Close, _) => {
                    items.push(&line[from..i]);
                    end = Some(i);
                }
                _ => {}
            }
        }
        i += 1;
    });
    // `[]` and `[ ]` hold nothing; an item of white space between commas is a broken batch,
    // which the item's own framing reports.
    if items.len() == 1 && items[0].iter().all(u8::is_ascii_whitespace) {
        items.clear();
    }
    Some(items)
}

/// Frames one message (a line, or one message of a batch).
pub fn frame(line: &[u8]) -> Frame {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let depth = nesting(line);
    if depth > MAX_FRAME_DEPTH {
        return refuse_deep(line, depth);
    }
    // The nesting is known to be bounded, so serde_json's own recursion limit may go: it is
    // what dropped the deep requests.
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let value = match crate::strict_json::value(&mut de).and_then(|v| de.end().map(|_| v)) {
        Ok(v) => v,
        Err(e) => return refuse_unreadable(line, &e),
    };
    let id = value.get("id").cloned();
    let method = value
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    if crate::model::has_float(&value) {
        if let Some((_, literal)) = crate::model::inexact_number(line) {
            return refuse_inexact(&value, literal);
        }
    }
    // A request (it names a method) whose id is neither a string nor an integer — `true`, an
    // object, `1.5`, `null` — cannot be echoed, but is answered: its error goes without an id.
    // (An integer past 2^63 is answered below, with its own sentence.)
    if let (Some(id), Some(_)) = (&id, &method) {
        if request_id(Some(id)).is_none() && !id.is_u64() {
            return answer_error(
                ErrorData::invalid_request(
                    format!(
                        "the request id {} is not a string or an integer: give every request such an id (a notification has none)",
                        crate::model::shorten(&id.to_string(), 40)
                    ),
                    None,
                ),
                None,
            );
        }
    }
    // A message with an id that names no method and is no response (it has no `result` or
    // `error`) is a request without its method: answered, not taken for a stray response (found
    // by an exploratory test: the host waited for its id).
    let names_method = value.get("method").is_some();
    let responds = value.get("result").is_some() || value.get("error").is_some();
    if let (Some(rid), None) = (request_id(id.as_ref()), &method) {
        if names_method || !responds {
            let got = value.get("method").map_or("none", type_name);
            return answer_error(
                ErrorData::invalid_request(
                    format!("a request needs a `method` string naming what it asks (tools/call, initialize …), got {got}"),
                    None,
                ),
                Some(rid),
            );
        }
    }
    if let Some(problem) = bad_tool_call(&value).or_else(|| bad_initialize(&value)) {
        return match request_id(id.as_ref()) {
            Some(id) => answer_error(ErrorData::invalid_params(problem, None), Some(id)),
            None => Frame::Ignore(problem),
        };
    }
    match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
        Ok(message) => Frame::Message(Box::new(message)),
        Err(e) => match (request_id(id.as_ref()), method) {
            (Some(id), Some(method)) => answer_error(
                ErrorData::invalid_request(
                    format!(
                        "{} is not a valid request: {e}",
                        crate::model::shorten(&method, 60)
                    ),
                    None,
                ),
                Some(id),
            ),
            // An id from 2^63 to 2^64 - 1 reads as a number but is no id memscope can echo:
            // like an id past 64 bits, its error goes without one.
            (None, Some(_)) if id.as_ref().is_some_and(|i| i.as_u64().is_some()) => answer_error(
                ErrorData::invalid_request(
                    format!(
                        "the request id {} is past the largest id memscope answers (9223372036854775807): use a smaller id, or a string",
                        id.as_ref().map(Value::to_string).unwrap_or_default()
                    ),
                    None,
                ),
                None,
            ),
            // A notification memscope does not know, or a stray response: nothing to answer.
            _ => Frame::Ignore(format!(
                "a message that is not a request memscope knows ({e})"
            )),
        },
    }
}

/// An `initialize` whose params have the wrong shape, in one sentence naming the field (rmcp's
/// own answer named fields of a request `_meta` the client never sent — found by an exploratory
/// test). The same fields rmcp requires, so nothing it would accept is refused here.
fn bad_initialize(message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("initialize") {
        return None;
    }
    let shape = "initialize needs params {\"protocolVersion\": \"2025-06-18\", \"capabilities\": {}, \"clientInfo\": {\"name\": \"…\", \"version\": \"…\"}}";
    let Some(params) = message.get("params").and_then(Value::as_object) else {
        let got = message.get("params").map_or("none", type_name);
        return Some(format!("{shape}; its params are {got}"));
    };
    let field = |v: Option<&Value>| v.map_or("missing", type_name);
    if !params.get("protocolVersion").is_some_and(Value::is_string) {
        let got = field(params.get("protocolVersion"));
        return Some(format!(
            "{shape}; its `protocolVersion` is {got}, not a string"
        ));
    }
    if !params.get("capabilities").is_some_and(Value::is_object) {
        let got = field(params.get("capabilities"));
        return Some(format!(
            "{shape}; its `capabilities` is {got}, not an object"
        ));
    }
    let Some(info) = params.get("clientInfo").and_then(Value::as_object) else {
        let got = field(params.get("clientInfo"));
        return Some(format!("{shape}; its `clientInfo` is {got}, not an object"));
    };
    for key in ["name", "version"] {
        if !info.get(key).is_some_and(Value::is_string) {
            let got = field(info.get(key));
            return Some(format!(
                "{shape}; its `clientInfo.{key}` is {got}, not a string"
            ));
        }
    }
    None
}

/// A `tools/call` whose params or arguments have the wrong shape, in one sentence.
fn bad_tool_call(message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let Some(params) = message.get("params") else {
        return Some("tools/call needs params with the tool's `name` and its `arguments`".into());
    };
    let Some(params) = params.as_object() else {
        return Some(format!(
            "tools/call params must be an object with `name` and `arguments`, got {}",
            type_name(params)
        ));
    };
    if !params.get("name").is_some_and(Value::is_string) {
        return Some("tools/call params need the tool's `name` as a string".into());
    }
    match params.get("arguments") {
        None | Some(Value::Null) | Some(Value::Object(_)) => None,
        Some(other) => Some(format!(
            "tools/call `arguments` must be an object of named arguments, e.g. {{\"predicate\": \"package_manager\"}}, got {}",
            type_name(other)
        )),
    }
}

fn request_id(id: Option<&Value>) -> Option<RequestId> {
    id.and_then(|id| serde_json::from_value(id.clone()).ok())
}

fn answer_error(error: ErrorData, id: Option<RequestId>) -> Frame {
    Frame::Answer(Box::new(ServerJsonRpcMessage::error(error, id)))
}

/// Answers a line serde_json cannot read when its top level still names a request — a number
/// past what a double holds (`1e400`) deep in the arguments, say: a tool error for a tool
/// call, a parse error otherwise, so that the host is not left waiting for its id. A line
/// whose top level cannot be read either is not a request, and nothing answers it.
fn refuse_unreadable(line: &[u8], e: &serde_json::Error) -> Frame {
    let unreadable = || Frame::Ignore(format!("a line that is not JSON ({e})"));
    // The line's first value: one followed by more text (`{…} x`, two requests on one line)
    // still names its id, and its sender waits for that id.
    let flat = flatten_below(line, 1);
    let Some(Ok(head)) = serde_json::Deserializer::from_slice(&flat)
        .into_iter::<Value>()
        .next()
    else {
        return unreadable();
    };
    let Some(id) = request_id(head.get("id")) else {
        return unreadable();
    };
    let cause = e.to_string();
    let advice = if cause.contains("number out of range") {
        "send numbers within a double's range, or as strings"
    } else if [
        "escape",
        "surrogate",
        "unicode",
        "control character",
        "UTF-8",
    ]
    .iter()
    .any(|w| cause.contains(w))
    {
        "send each string as valid UTF-8 with its control characters escaped (\\n, \\u0007), and never half of an emoji (a \\ud83d without its pair): a string cut in the middle of a character is the usual cause"
    } else if cause.contains(crate::strict_json::DUPLICATE_KEY) {
        "send each key of an object once: a key named twice leaves it unclear which value was meant"
    } else if cause.contains("trailing characters") {
        "send one JSON object per line, with nothing after it (a newline ends each message)"
    } else {
        "send the call as one valid JSON object"
    };
    let text = format!("the call is not JSON memscope can read ({e}): {advice}");
    if head.get("method").and_then(Value::as_str) == Some("tools/call") {
        tool_error(text, id)
    } else {
        answer_error(ErrorData::parse_error(text, None), Some(id))
    }
}

/// Answers a message nested deeper than memscope stores: a tool error for a tool call (the
/// model can flatten its value and call again), an invalid request otherwise. The id and
/// method are read from the message with everything below the top level cut away.
fn refuse_deep(line: &[u8], depth: usize) -> Frame {
    let head: Value = match serde_json::from_slice(&flatten_below(line, 1)) {
        Ok(v) => v,
        Err(e) => return Frame::Ignore(format!("a line that is not JSON ({e})")),
    };
    let Some(id) = request_id(head.get("id")) else {
        return Frame::Ignore(format!("a notification nested {depth} levels deep"));
    };
    let text = format!(
        "the call is nested {depth} levels deep; memscope keeps values nested at most {MAX_VALUE_DEPTH} levels (the message adds 3): store a flatter value",
    );
    if head.get("method").and_then(Value::as_str) == Some("tools/call") {
        tool_error(text, id)
    } else {
        answer_error(ErrorData::invalid_request(text, None), Some(id))
    }
}

/// Answers a message holding an integer no 64-bit integer holds (serde_json has already rounded
/// it): a tool error for a tool call, so the model can send it as a string and call again;
/// invalid params otherwise.
fn refuse_inexact(message: &Value, literal: &str) -> Frame {
    let text = crate::model::inexact_number_sentence(literal);
    let Some(id) = request_id(message.get("id")) else {
        // An id that is itself such an integer cannot be echoed: the error goes without one.
        if message.get("id").is_some() {
            return answer_error(ErrorData::invalid_request(text, None), None);
        }
        return Frame::Ignore(format!("a notification that holds {literal}"));
    };
    if message.get("method").and_then(Value::as_str) == Some("tools/call") {
        tool_error(text, id)
    } else {
        answer_error(ErrorData::invalid_params(text, None), Some(id))
    }
}

/// Answers a request longer than [`MAX_LINE`] by its id, read from `top` (the line's top
/// level, nested values cut to `null`; a batch's top two levels): a tool error for a tool
/// call, an invalid request otherwise — and, for a batch that long, each of its requests whose
/// id was kept. Nothing answers a line whose top level names no id.
fn refuse_too_long(top: &[u8]) -> Vec<Frame> {
    let ignored = || Frame::Ignore(format!("a message longer than {} MiB", MAX_LINE >> 20));
    if let Some(items) = batch_items(top) {
        let text = format!(
            "the batch is longer than {} MiB, more than memscope reads in one message, and none of it was read: send fewer requests in one batch, or each on its own",
            MAX_LINE >> 20
        );
        let answers: Vec<Frame> = items
            .into_iter()
            .filter_map(|item| serde_json::from_slice::<Value>(item).ok())
            .filter_map(|head| refuse_by_id(&head, &text))
            .collect();
        return if answers.is_empty() {
            vec![ignored()]
        } else {
            answers
        };
    }
    let text = format!(
        "the call is longer than {} MiB, more than memscope reads in one message, and was not read: store a shorter value (a summary, or the part that matters)",
        MAX_LINE >> 20
    );
    let head = serde_json::from_slice::<Value>(top).ok();
    vec![head
        .and_then(|head| refuse_by_id(&head, &text))
        .unwrap_or_else(ignored)]
}

/// `text` as the answer to the request `head` names by its id (a tool error for a tool call);
/// `None` when it names none.
fn refuse_by_id(head: &Value, text: &str) -> Option<Frame> {
    let id = request_id(head.get("id"))?;
    Some(
        if head.get("method").and_then(Value::as_str) == Some("tools/call") {
            tool_error(text.to_string(), id)
        } else {
            answer_error(ErrorData::invalid_request(text.to_string(), None), Some(id))
        },
    )
}

/// A tool call's answer that is a tool error the model reads.
fn tool_error(text: String, id: RequestId) -> Frame {
    let mut result =
        ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(text)]));
    // "complete" is what every protocol version assumes when it is absent.
    result.strip_result_type_for_legacy_peer();
    Frame::Answer(Box::new(ServerJsonRpcMessage::response(result, id)))
}

/// The JSON text with every array or object deeper than `keep` levels replaced by `null`.
fn flatten_below(text: &[u8], keep: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len().min(4096));
    walk(text, |b, kind, depth| match kind {
        Byte::Open if depth == keep + 1 => out.extend_from_slice(b"null"),
        _ if depth <= keep => out.push(b),
        _ => {}
    });
    out
}

/// The requests read and not yet answered. At the end of input the reader waits for them before
/// it lets rmcp see the end: rmcp writes answers for only five seconds after its input ends,
/// and a call waiting on another process's lock longer than that would have committed with
/// no answer written (README, "Agents: memscope as an MCP server": every request gets an
/// answer). A request the client cancelled is not waited for (rmcp drops its answer).
#[derive(Default)]
struct Unanswered {
    state: std::sync::Mutex<UnansweredState>,
    changed: std::sync::Condvar,
}

#[derive(Default)]
struct UnansweredState {
    ids: std::collections::HashSet<RequestId>,
    /// Answers the reader made itself (refusals, unreadable lines), by id, not yet written: the
    /// id they answer by may be a running call's (a reused id), which they must not free.
    own: std::collections::HashMap<RequestId, usize>,
    /// The writer stopped (stdout closed): nothing more will be answered.
    writer_gone: bool,
    /// The server stopped (its handshake failed): no request read is waited for any more.
    server_gone: bool,
    /// Where the session's handshake stands, as the answers written tell it.
    handshake: Handshake,
}

/// Where a session's handshake stands: rmcp answers a refused `initialize` and waits for
/// another, but ends the session at a `notifications/initialized` that comes before one it
/// accepted — which a client sending its handshake without waiting does (found by an
/// exploratory test).
#[derive(Default, Clone, PartialEq)]
enum Handshake {
    /// No `initialize` accepted yet, none waiting for its answer.
    #[default]
    Open,
    /// The `initialize` request of this id waits for its answer.
    Asked(RequestId),
    /// An `initialize` was answered with a result: the session has begun.
    Accepted,
}

/// The longest the end of input waits for the calls still running: past the longest lock
/// wait a call makes (`MEMSCOPE_BUSY_TIMEOUT_MS`, 15 s by default) with room to finish.
const END_OF_INPUT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

impl Unanswered {
    fn update(&self, f: impl FnOnce(&mut UnansweredState)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state);
        self.changed.notify_all();
    }

    /// Notes what the reader passes to rmcp: a request to wait for, a cancellation to stop
    /// waiting for one. False for a request whose id a request still unanswered holds: MCP
    /// forbids reusing an id in a session, and rmcp would take the two for one call.
    fn read(&self, message: &RxJsonRpcMessage<RoleServer>) -> bool {
        let mut fresh = true;
        match message {
            JsonRpcMessage::Request(r) => self.update(|s| {
                fresh = s.ids.insert(r.id.clone());
            }),
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    if let Some(id) = &c.params.request_id {
                        self.update(|s| {
                            s.ids.remove(id);
                        });
                    }
                }
            }
            _ => {}
        }
        fresh
    }

    /// Notes an answer the reader made itself, before it is sent to the writer.
    fn own_answer(&self, message: &ServerJsonRpcMessage) {
        if let Some(id) = answered_id(message) {
            self.update(|s| *s.own.entry(id.clone()).or_default() += 1);
        }
    }

    /// Holds a `notifications/initialized` while the `initialize` before it waits for its
    /// answer (2 minutes at most): whether it may go to rmcp — the `initialize` was accepted —
    /// or not, to be dropped. Anything else goes; an `initialize` read is noted.
    fn may_pass(&self, message: &RxJsonRpcMessage<RoleServer>) -> bool {
        match message {
            JsonRpcMessage::Request(r) => {
                if matches!(r.request, ClientRequest::InitializeRequest(_)) {
                    self.update(|s| {
                        if s.handshake != Handshake::Accepted {
                            s.handshake = Handshake::Asked(r.id.clone());
                        }
                    });
                }
                true
            }
            JsonRpcMessage::Notification(n)
                if matches!(
                    n.notification,
                    ClientNotification::InitializedNotification(_)
                ) =>
            {
                let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let (state, _) = self
                    .changed
                    .wait_timeout_while(state, END_OF_INPUT_WAIT, |s| {
                        matches!(s.handshake, Handshake::Asked(_))
                            && !s.writer_gone
                            && !s.server_gone
                    })
                    .unwrap_or_else(|e| e.into_inner());
                state.handshake == Handshake::Accepted
            }
            _ => true,
        }
    }

    /// Notes an answer taken to be written, and says whether to write it: a served call's id
    /// is free again; one of the reader's own answers frees nothing (of two answers by one id —
    /// a refusal and the running call's — whichever comes second frees it, so their order does
    /// not matter); the answer to an `initialize` says where the handshake stands. Not written:
    /// a stopped server's answer ([`Stopped`]) to a request rmcp answered after all — rmcp's
    /// answers were queued before the stop, and are written first. One lock an answer.
    fn written(&self, message: &ServerJsonRpcMessage) -> bool {
        let Some(id) = answered_id(message) else {
            return true;
        };
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.server_gone && !s.ids.contains(id) && !s.own.contains_key(id) {
            return false;
        }
        if matches!(&s.handshake, Handshake::Asked(asked) if asked == id) {
            s.handshake = match message {
                JsonRpcMessage::Response(_) => Handshake::Accepted,
                _ => Handshake::Open,
            };
        }
        match s.own.get_mut(id) {
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    s.own.remove(id);
                }
            }
            None => {
                s.ids.remove(id);
            }
        }
        drop(s);
        self.changed.notify_all();
        true
    }

    /// Waits until every request read is answered, the writer or the server is gone, or
    /// `limit` passed.
    fn wait(&self, limit: std::time::Duration) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.changed.wait_timeout_while(state, limit, |s| {
            !s.ids.is_empty() && !s.writer_gone && !s.server_gone
        });
    }
}

/// Why a request read after rmcp stopped before its session began is answered without running.
const STOPPED: &str = "the MCP session ended before it began (its handshake failed)";

/// The answer to a request that was not run, and why.
fn not_run(why: &str, id: RequestId) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::invalid_request(format!("{why}: this request was not run"), None),
        Some(id),
    )
}

/// What the server uses once rmcp has stopped before its session began: the requests read
/// and not answered, answered here.
pub struct Stopped {
    unanswered: std::sync::Arc<Unanswered>,
    answers: mpsc::UnboundedSender<ServerJsonRpcMessage>,
}

impl Stopped {
    /// Answers every request read and not answered with `why` (found by an exploratory test: a
    /// refused `initialize` followed at once by a call ended rmcp's handshake; the call was
    /// never answered, and the reader waited 120 s for it with the process alive after the
    /// client closed its input), and waits — 2 s at most — until every answer is written.
    pub fn answer_the_rest(self) {
        let why = STOPPED;
        let ids: Vec<RequestId> = {
            let mut state = self
                .unanswered
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            state.server_gone = true;
            state.ids.iter().cloned().collect()
        };
        self.unanswered.changed.notify_all();
        for id in ids {
            if self.answers.unbounded_send(not_run(why, id)).is_err() {
                break;
            }
        }
        drop(self.answers);
        let state = self
            .unanswered
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let _ = self.unanswered.changed.wait_timeout_while(
            state,
            std::time::Duration::from_secs(2),
            |s| !s.ids.is_empty() && !s.writer_gone,
        );
    }
}

/// The id an answer answers by, if it has one.
fn answered_id(message: &ServerJsonRpcMessage) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Response(r) => Some(&r.id),
        JsonRpcMessage::Error(e) => e.id.as_ref(),
        _ => None,
    }
}

/// The two ends rmcp serves on, the writer thread to wait for once it is done, and what answers
/// the rest when rmcp stopped before its session began.
pub struct Stdio {
    pub sink: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    pub stream: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    pub writer: std::thread::JoinHandle<()>,
    pub stopped: Stopped,
}

/// Starts the reader and writer threads on stdin and stdout.
pub fn stdio() -> std::io::Result<Stdio> {
    let (sink, outgoing) = mpsc::unbounded::<ServerJsonRpcMessage>();
    // A few messages of read-ahead: a host that floods us waits on the pipe, not on memory.
    let (mut incoming, stream) = mpsc::channel::<RxJsonRpcMessage<RoleServer>>(16);
    let answers = sink.clone();
    let unanswered = std::sync::Arc::new(Unanswered::default());
    let stopped = Stopped {
        unanswered: unanswered.clone(),
        answers: sink.clone(),
    };
    let written = unanswered.clone();
    let writer = std::thread::Builder::new()
        .name("mcp-writer".into())
        .spawn(move || {
            write_lines(outgoing, &written);
            written.update(|s| s.writer_gone = true);
        })?;
    std::thread::Builder::new()
        .name("mcp-reader".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let (mut line, mut top) = (Vec::new(), Vec::new());
            loop {
                line.clear();
                let framed = match read_line(&mut input, &mut line, &mut top) {
                    Ok(None) => {
                        // The client closed its end: answer what is still running first.
                        unanswered.wait(END_OF_INPUT_WAIT);
                        return;
                    }
                    // Too long to read: answered by the ids its kept top levels name.
                    Ok(Some(false)) => refuse_too_long(&top),
                    Ok(Some(true)) if line.iter().all(u8::is_ascii_whitespace) => continue,
                    Ok(Some(true)) => frames(&line),
                    Err(e) => {
                        crate::frontend::errln!("memscope mcp: cannot read stdin: {e}");
                        return;
                    }
                };
                for framed in framed {
                    match framed {
                        Frame::Message(m) => {
                            if !unanswered.may_pass(&m) {
                                crate::frontend::errln!(
                                    "memscope mcp: ignored notifications/initialized: no `initialize` request was accepted before it (send `initialize` and wait for its answer first)"
                                );
                                continue;
                            }
                            if !unanswered.read(&m) {
                                let refusal = refuse_reused_id(&m);
                                unanswered.own_answer(&refusal);
                                if answers.unbounded_send(refusal).is_err() {
                                    return;
                                }
                                continue;
                            }
                            let id = match &*m {
                                JsonRpcMessage::Request(r) => Some(r.id.clone()),
                                _ => None,
                            };
                            let sent = futures::executor::block_on(futures::SinkExt::send(
                                &mut incoming,
                                *m,
                            ));
                            if sent.is_err() {
                                // The server stopped: a request read after is answered so.
                                if let Some(id) = id {
                                    let _ = answers.unbounded_send(not_run(STOPPED, id));
                                }
                                return;
                            }
                        }
                        Frame::Answer(a) => {
                            unanswered.own_answer(&a);
                            if answers.unbounded_send(*a).is_err() {
                                return;
                            }
                        }
                        Frame::Ignore(why) => {
                            crate::frontend::errln!("memscope mcp: ignored {why}")
                        }
                    }
                }
            }
        })?;
    Ok(Stdio {
        sink,
        stream,
        writer,
        stopped,
    })
}

/// The answer to a request that reuses the id of a call still running (found by review: the
/// second was taken for the first, and the end of input stopped waiting for it).
fn refuse_reused_id(message: &RxJsonRpcMessage<RoleServer>) -> ServerJsonRpcMessage {
    let id = match message {
        JsonRpcMessage::Request(r) => Some(r.id.clone()),
        _ => None,
    };
    let shown = id
        .as_ref()
        .and_then(|i| serde_json::to_string(i).ok())
        .unwrap_or_default();
    ServerJsonRpcMessage::error(
        ErrorData::invalid_request(
            format!(
                "the request id {} belongs to a call still running: give each request of a session an id of its own; nothing of this one ran",
                crate::model::shorten(&shown, 40)
            ),
            None,
        ),
        id,
    )
}

/// How much of a too-long line's top levels [`read_line`] keeps to answer it by its id (or a
/// batch's requests by theirs: some 15,000 of them).
const TOP_LEVEL_KEPT: usize = 1 << 20;

/// Reads one line into `line` (without the newline). `None` at the end of input;
/// `Some(false)` when the line was longer than [`MAX_LINE`] and was skipped — then `top` holds
/// its top level with every nested value cut to `null` (`flatten_below(line, 1)`; for a batch
/// its top two levels, `flatten_below(line, 2)`), read as it
/// streams past, at most [`TOP_LEVEL_KEPT`] bytes), from which [`refuse_too_long`] finds the
/// request's id wherever the host put it.
fn read_line(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    top: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    let mut too_long = false;
    let mut walker = Walker::default();
    top.clear();
    // A message's top level holds its id; a batch's messages hold theirs one level down.
    let mut levels: Option<usize> = None;
    let mut keep_top = |bytes: &[u8], walker: &mut Walker, top: &mut Vec<u8>| {
        let keep =
            *levels.get_or_insert_with(|| match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'[') => 2,
                _ => 1,
            });
        walker.feed(bytes, |b, kind, depth| {
            if top.len() >= TOP_LEVEL_KEPT {
                return;
            }
            match kind {
                Byte::Open if depth == keep + 1 => top.extend_from_slice(b"null"),
                _ if depth <= keep => top.push(b),
                _ => {}
            }
        })
    };
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            let had = !line.is_empty() || too_long;
            return Ok(had.then_some(!too_long));
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let body = if done {
            &available[..take - 1]
        } else {
            available
        };
        if !too_long && line.len() + body.len() <= MAX_LINE {
            line.extend_from_slice(body);
        } else {
            if !too_long {
                keep_top(line, &mut walker, top);
                line.clear();
                too_long = true;
            }
            keep_top(body, &mut walker, top);
        }
        input.consume(take);
        if done {
            return Ok(Some(!too_long));
        }
    }
}

/// One message as JSON text. An error whose request's id could not be read carries `"id":
/// null`, as JSON-RPC 2.0 requires (rmcp leaves the member out, and the Python SDK then drops
/// the answer: the host would wait for it).
fn encode(message: &ServerJsonRpcMessage) -> serde_json::Result<Vec<u8>> {
    // rmcp answers a method memscope does not serve with the bare method name as the message
    // (`"message":"nope"`): said as a sentence here, for every such method (found by review).
    if let rmcp::model::JsonRpcMessage::Error(e) = message {
        let bare = !e.error.message.contains(' ');
        if e.error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND && bare {
            let mut e = e.clone();
            e.error.message = format!(
                "memscope serves no method {}: it serves initialize, ping, tools/list and tools/call",
                crate::model::to_json(&crate::model::shorten(&e.error.message, 60))
                    .unwrap_or_default()
            )
            .into();
            return encode(&rmcp::model::JsonRpcMessage::Error(e));
        }
    }
    match message {
        rmcp::model::JsonRpcMessage::Error(e) if e.id.is_none() => {
            let mut value = serde_json::to_value(message)?;
            if let Value::Object(fields) = &mut value {
                fields.insert("id".into(), Value::Null);
            }
            serde_json::to_vec(&value)
        }
        _ => serde_json::to_vec(message),
    }
}

/// Writes each message as one line and flushes it, in the order sent (the reader's own answers
/// before those of requests read after them); stops when every sender is gone or stdout is
/// closed.
///
/// An answer's id is free again from the moment the answer is taken to be written, not after:
/// a client that reads it may send its next request under the same id at once, and was refused
/// as reusing a running call's id (found by a flaky test). The end of input waits for nothing
/// more then, and loses nothing: this thread writes what it took, and the server joins it
/// before it exits.
fn write_lines(outgoing: mpsc::UnboundedReceiver<ServerJsonRpcMessage>, unanswered: &Unanswered) {
    let stdout = std::io::stdout();
    for message in futures::executor::block_on_stream(outgoing) {
        if !unanswered.written(&message) {
            continue;
        }
        let mut text = match encode(&message) {
            Ok(t) => t,
            Err(e) => {
                crate::frontend::errln!("memscope mcp: cannot encode an answer: {e}");
                continue;
            }
        };
        text.push(b'\n');
        let mut out = stdout.lock();
        if let Err(e) = out.write_all(&text).and_then(|_| out.flush()) {
            crate::frontend::errln!(
                "memscope mcp: the client stopped reading answers ({e}): no call is answered from here on; the server stops when the client closes its input"
            );
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    fn call(args: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"remember","arguments":{args}}}}}"#
        )
    }

    fn answer(f: Frame) -> Value {
        match f {
            Frame::Answer(a) => serde_json::from_slice(&encode(&a).unwrap()).unwrap(),
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    /// The JSON-RPC error an answer carries: its code and message.
    fn error_of(a: &Value) -> (i64, &str) {
        let error = &a["error"];
        (
            error["code"].as_i64().unwrap_or_default(),
            error["message"].as_str().unwrap_or_default(),
        )
    }

    #[test]
    fn nesting_skips_strings_and_escapes() {
        assert_eq!(nesting(br#"{"a":"[[[{{","b":[1,[2]]}"#), 3);
        assert_eq!(nesting(br#"["\"[", {"k\\":[]}]"#), 3);
        assert_eq!(nesting(deep(100_000).as_bytes()), 100_000);
        assert_eq!(nesting(b"12"), 0);
    }

    #[test]
    fn a_value_at_the_limit_reaches_the_server() {
        let v = deep(MAX_VALUE_DEPTH);
        let line = call(&format!(
            r#"{{"predicate":"p","value":{v},"source":"s","scope":"global"}}"#
        ));
        assert_eq!(nesting(line.as_bytes()), MAX_FRAME_DEPTH);
        assert!(matches!(frame(line.as_bytes()), Frame::Message(_)));
    }

    #[test]
    fn a_deeper_call_is_a_tool_error_with_its_id() {
        for levels in [MAX_VALUE_DEPTH + 1, 200, 100_000] {
            let line = call(&format!(r#"{{"predicate":"p","value":{}}}"#, deep(levels)));
            let a = answer(frame(line.as_bytes()));
            assert_eq!(a["id"], 7, "{a}");
            assert_eq!(a["result"]["isError"], true, "{a}");
            let text = a["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("at most 127 levels"), "{text}");
        }
        // Objects nest the same way.
        let mut obj = "1".to_string();
        for _ in 0..200 {
            obj = format!(r#"{{"a":{obj}}}"#);
        }
        let a = answer(frame(call(&format!(r#"{{"value":{obj}}}"#)).as_bytes()));
        assert_eq!(a["result"]["isError"], true);
    }

    #[test]
    fn a_deep_request_of_another_method_is_an_invalid_request() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":"x1","method":"resources/list","params":{}}}"#,
            deep(300)
        );
        let a = answer(frame(line.as_bytes()));
        assert_eq!(a["id"], "x1");
        assert_eq!(error_of(&a).0, -32600, "{a}");
    }

    #[test]
    fn arguments_that_are_not_an_object_are_invalid_params() {
        for args in [r#""predicate=pm""#, "[1]", "3", "true"] {
            let a = answer(frame(call(args).as_bytes()));
            assert_eq!(a["id"], 7);
            let (code, message) = error_of(&a);
            assert_eq!(code, -32602, "{a}");
            assert!(message.contains("must be an object"), "{a}");
        }
        assert!(matches!(frame(call("null").as_bytes()), Frame::Message(_)));
    }

    #[test]
    fn garbage_and_unknown_notifications_are_ignored() {
        assert!(matches!(frame(b"not json"), Frame::Ignore(_)));
        assert!(matches!(frame(b"{\"a\":"), Frame::Ignore(_)));
        let n = br#"{"jsonrpc":"2.0","method":"$/lsp/thing","params":{}}"#;
        assert!(!matches!(frame(n), Frame::Answer(_)));
        // A deep notification has no id to answer.
        let n = format!(r#"{{"jsonrpc":"2.0","method":"x","params":{}}}"#, deep(500));
        assert!(matches!(frame(n.as_bytes()), Frame::Ignore(_)));
    }

    #[test]
    fn a_message_with_an_id_and_no_method_string_is_an_invalid_request() {
        for (line, got) in [
            (r#"{"jsonrpc":"2.0","id":3,"params":{}}"#, "got none"),
            (r#"{"jsonrpc":"2.0","id":"甲","method":null}"#, "got null"),
            (r#"{"jsonrpc":"2.0","id":5,"method":5}"#, "got a number"),
        ] {
            let a = answer(frame(line.as_bytes()));
            assert_eq!(
                error_of(&a),
                (-32600, a["error"]["message"].as_str().unwrap())
            );
            let message = a["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("needs a `method` string") && message.contains(got),
                "{a}"
            );
            assert_ne!(a["id"], Value::Null, "{a}");
        }
        // A response (the client answering a request of the server's) is no request.
        let r = br#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        assert!(!matches!(frame(r), Frame::Answer(_)));
    }

    #[test]
    fn an_initialize_of_the_wrong_shape_names_its_field() {
        for (params, words) in [
            ("{}", "its `protocolVersion` is missing"),
            ("null", "its params are null"),
            (
                r#"{"protocolVersion":5,"capabilities":{},"clientInfo":{"name":"a","version":"1"}}"#,
                "`protocolVersion` is a number",
            ),
            (
                r#"{"protocolVersion":"2025-06-18","capabilities":[],"clientInfo":{"name":"a","version":"1"}}"#,
                "`capabilities` is a list",
            ),
            (
                r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":null,"version":"1"}}"#,
                "`clientInfo.name` is null",
            ),
            (
                r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"客户端🤖"}}"#,
                "`clientInfo.version` is missing",
            ),
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{params}}}"#);
            let a = answer(frame(line.as_bytes()));
            let message = a["error"]["message"].as_str().unwrap_or_default();
            assert_eq!(a["error"]["code"], -32602, "{a}");
            assert!(
                message.starts_with("initialize needs params") && message.contains(words),
                "{a}"
            );
        }
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"客户端🤖","version":"1"}}}"#;
        assert!(matches!(frame(good.as_bytes()), Frame::Message(_)));
    }

    #[test]
    fn a_batch_is_cut_at_its_top_level_commas_only() {
        let line = br#" [{"id":1,"s":"a,]b"}, {"id":2,"p":[1,[2,3]]} ,3]"#;
        let items: Vec<&str> = batch_items(line)
            .unwrap()
            .into_iter()
            .map(|i| std::str::from_utf8(i).unwrap().trim())
            .collect();
        assert_eq!(
            items,
            [r#"{"id":1,"s":"a,]b"}"#, r#"{"id":2,"p":[1,[2,3]]}"#, "3"]
        );
        assert_eq!(batch_items(b"[ ]").unwrap().len(), 0);
        assert!(batch_items(br#"{"id":1}"#).is_none());
        // Each message of a batch is framed as a line would be.
        let two = format!("[{}, {}]", call("{}"), call("[1]"));
        let framed = frames(two.as_bytes());
        assert_eq!(framed.len(), 2);
        assert!(matches!(framed[0], Frame::Message(_)), "{framed:?}");
        assert_eq!(
            error_of(&answer(framed.into_iter().nth(1).unwrap())).0,
            -32602
        );
    }

    #[test]
    fn flatten_keeps_the_top_level() {
        let t = br#"{"id":3,"s":"[{\"","p":{"a":[1,{"b":2}]},"m":"x"}"#;
        let v: Value = serde_json::from_slice(&flatten_below(t, 1)).unwrap();
        assert_eq!(v, serde_json::json!({"id":3,"s":"[{\"","p":null,"m":"x"}));
    }

    #[test]
    fn read_line_bounds_a_line_and_keeps_the_next() {
        let big = vec![b'x'; MAX_LINE + 10];
        let mut input = Vec::new();
        input.extend_from_slice(&big);
        input.extend_from_slice(b"\n{\"ok\":1}\nlast");
        let mut r = std::io::BufReader::new(&input[..]);
        let (mut line, mut top) = (Vec::new(), Vec::new());
        assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), Some(false));
        line.clear();
        assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), Some(true));
        assert_eq!(line, b"{\"ok\":1}");
        line.clear();
        assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), Some(true));
        assert_eq!(line, b"last");
        line.clear();
        assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), None);
    }

    /// A request longer than the bound is answered by its id, wherever the host put it: first
    /// (Python's SDK) or after the params (TypeScript's spreads them first).
    #[test]
    fn a_request_longer_than_the_bound_is_answered_by_its_id() {
        let value = "燕".repeat(MAX_LINE / 3 + 10);
        for (id, message) in [
            (
                7,
                format!(
                    r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"remember","arguments":{{"value":"{value}"}}}}}}"#
                ),
            ),
            (
                8,
                format!(
                    r#"{{"method":"tools/call","params":{{"name":"remember","arguments":{{"value":"{value}","id":99}}}},"jsonrpc":"2.0","id":8}}"#
                ),
            ),
        ] {
            let input = format!("{message}\n");
            let mut r = std::io::BufReader::new(input.as_bytes());
            let (mut line, mut top) = (Vec::new(), Vec::new());
            assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), Some(false));
            let mut refused = refuse_too_long(&top);
            assert_eq!(refused.len(), 1);
            let Frame::Answer(answer) = refused.remove(0) else {
                panic!("no answer for id {id}");
            };
            let text = serde_json::to_string(&answer).unwrap();
            assert!(text.contains(&format!("\"id\":{id}")), "{text}");
            assert!(
                text.contains("longer than 16 MiB") && text.contains("\"isError\":true"),
                "{text}"
            );
        }
        // A message that names no id (a notification) is not answered.
        let big = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/x","params":{{"v":"{}"}}}}"#,
            "x".repeat(MAX_LINE)
        );
        let mut r = std::io::BufReader::new(big.as_bytes());
        let (mut line, mut top) = (Vec::new(), Vec::new());
        assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), Some(false));
        assert!(matches!(refuse_too_long(&top)[..], [Frame::Ignore(_)]));
        // A batch that long: each of its requests is answered by its id.
        let recall = |id: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"recall","arguments":{{"predicate":"{}"}}}}}}"#,
                "p".repeat(2_000)
            )
        };
        let batch = format!(
            "[{}]",
            (1..=9_000).map(recall).collect::<Vec<_>>().join(",")
        );
        assert!(batch.len() > MAX_LINE);
        let mut r = std::io::BufReader::new(batch.as_bytes());
        let (mut line, mut top) = (Vec::new(), Vec::new());
        assert_eq!(read_line(&mut r, &mut line, &mut top).unwrap(), Some(false));
        let refused = refuse_too_long(&top);
        assert_eq!(refused.len(), 9_000);
        let last = answer(refused.into_iter().last().unwrap());
        assert_eq!(last["id"], 9_000);
        assert_eq!(last["result"]["isError"], true, "{last}");
    }

    /// Found by review: a message with text after it on its line got no answer, and its
    /// sender waited for its id for ever. It is answered by its id, and nothing of it runs.
    #[test]
    fn a_message_with_text_after_it_is_answered_by_its_id() {
        let args = r#"{"predicate":"包管理器","value":"pnpm 📦","source":"s","scope":"global"}"#;
        for tail in [" x", " {\"id\":8}", "}"] {
            let line = format!("{}{tail}", call(args));
            let a = answer(frame(line.as_bytes()));
            assert_eq!(a["id"], 7, "{line}: {a}");
            assert_eq!(a["result"]["isError"], true, "{a}");
            assert!(a.to_string().contains("nothing after it"), "{a}");
        }
        let a = answer(frame(br#"{"jsonrpc":"2.0","id":"p","method":"ping"} ping"#));
        assert_eq!(
            (a["id"].as_str(), error_of(&a).0),
            (Some("p"), -32700),
            "{a}"
        );
        // Text that is no message at all is still nobody's to answer.
        assert!(matches!(frame(b"[1] x"), Frame::Ignore(_)));
    }

    #[test]
    fn a_batch_runs_only_whole_and_holds_requests_only() {
        // Cut off, or with text after it: nothing in it runs; one parse error without an id.
        for line in [
            format!(
                "[{}, {{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/ca",
                call("{}")
            ),
            format!("[{}", call("{}")),
            format!("[{}] ,", call("{}")),
            format!("[{}][{}]", call("{}"), call("{}")),
        ] {
            let framed = frames(line.as_bytes());
            assert_eq!(framed.len(), 1, "{line}: {framed:?}");
            let a = answer(framed.into_iter().next().unwrap());
            assert_eq!(a.get("id"), Some(&Value::Null), "{a}");
            assert_eq!(error_of(&a).0, -32700, "{a}");
        }
        // A batch inside a batch, or a value: each item gets an invalid request.
        let line = format!("[{}, [{}], 3]", call("{}"), call("{}"));
        let framed = frames(line.as_bytes());
        assert_eq!(framed.len(), 3);
        assert!(matches!(framed[0], Frame::Message(_)));
        for f in framed.into_iter().skip(1) {
            assert_eq!(error_of(&answer(f)).0, -32600);
        }
    }

    #[test]
    fn an_id_past_the_largest_signed_64_bit_number_is_answered_without_one() {
        for id in ["9223372036854775808", "18446744073709551615"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let Frame::Answer(answer) = frame(line.as_bytes()) else {
                panic!("no answer for id {id}");
            };
            let v: Value = serde_json::from_slice(&encode(&answer).unwrap()).unwrap();
            assert!(
                v.get("id") == Some(&Value::Null) && v["error"]["code"] == -32600,
                "{v}"
            );
            assert!(v["error"]["message"].as_str().unwrap().contains(id), "{v}");
        }
    }
}
