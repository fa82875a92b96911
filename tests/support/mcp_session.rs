//! A raw newline-delimited JSON-RPC session with `memscope mcp`, for tests that drive the real
//! server byte by byte.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// A raw newline-delimited JSON-RPC session on stdio, with a deadline on every read.
pub struct RawSession {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    /// The server's own working directory and home, when [`RawSession::serve`] made them.
    _home: Option<tempfile::TempDir>,
}

impl RawSession {
    pub fn start(mut cmd: Command) -> RawSession {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn memscope mcp");
        let stdout = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let stdin = child.stdin.take();
        RawSession {
            child,
            stdin,
            lines,
            stderr,
            _home: None,
        }
    }

    /// `memscope --db DB mcp ARGS…` in a fresh working directory and home (so no host
    /// setting leaks in), initialized.
    pub fn serve(db: &str, args: &[&str]) -> RawSession {
        RawSession::serve_with(db, args, &[])
    }

    /// [`RawSession::serve`] with environment variables set.
    pub fn serve_with(db: &str, args: &[&str], env: &[(&str, &str)]) -> RawSession {
        let mut s = RawSession::serve_uninitialized(db, args, env);
        s.initialize();
        s
    }

    /// [`RawSession::serve_with`] before the handshake: the test sends its own.
    pub fn serve_uninitialized(db: &str, args: &[&str], env: &[(&str, &str)]) -> RawSession {
        let home = tempfile::tempdir().expect("a temp home");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memscope"));
        cmd.current_dir(home.path())
            .env_remove("MEMSCOPE_DB")
            .env("HOME", home.path())
            .envs(env.iter().copied())
            .args(["--db", db, "mcp"])
            .args(args);
        let mut s = RawSession::start(cmd);
        s._home = Some(home);
        s
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string());
    }

    /// The next message that answers request `id` (earlier messages are returned too).
    pub fn until_id(&mut self, id: i64) -> (Value, Vec<Value>) {
        self.until_id_within(id, Duration::from_secs(30))
    }

    /// [`RawSession::until_id`], each message waited for at most `wait`.
    pub fn until_id_within(&mut self, id: i64, wait: Duration) -> (Value, Vec<Value>) {
        let mut others = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(wait)
                .unwrap_or_else(|e| panic!("no answer to request {id} ({e}); before: {others:?}"));
            // An answer echoes a value as deep as the request carried it.
            let mut de = serde_json::Deserializer::from_str(&line);
            de.disable_recursion_limit();
            let msg: Value = serde::Deserialize::deserialize(&mut de)
                .unwrap_or_else(|e| panic!("the server wrote a non-JSON line ({e}): {line}"));
            if msg["id"] == json!(id) {
                return (msg, others);
            }
            others.push(msg);
        }
    }

    /// [`RawSession::request`], with the messages that came before its answer.
    pub fn request_collecting(
        &mut self,
        id: i64,
        method: &str,
        params: Value,
    ) -> (Value, Vec<Value>) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_id(id)
    }

    pub fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_id(id).0
    }

    pub fn initialize(&mut self) -> Value {
        self.initialize_as("raw-test-client")
    }

    /// The handshake, as a client that calls itself `client_name`.
    pub fn initialize_as(&mut self, client_name: &str) -> Value {
        let init = self.request(
            1,
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": client_name, "version": "0"}
            }),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    /// Closes stdin (the client is done sending) and keeps reading what comes.
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Closes stdin and waits: returns (exit code, stderr).
    pub fn finish(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("memscope mcp did not exit after its client closed stdin");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code().unwrap_or(-1), self.stderr.join().unwrap())
    }
}

/// Asserts that `answer` is a JSON-RPC error with `code` whose message says `words`.
#[track_caller]
pub fn assert_rpc_error(answer: &Value, code: i64, words: &str) {
    assert_eq!(answer["error"]["code"], code, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(words), "{answer}");
}

/// A `remember` request of `test_runner` in the server's repository, `mcp:ID` its source.
pub fn remember_test_runner(id: i64, value: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "remember", "arguments": {
            "predicate": "test_runner", "value": value, "scope": "repo",
            "source": format!("mcp:{id}")}}})
}

pub fn tool_text(result: &Value) -> String {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {result}"))
        .to_string()
}
