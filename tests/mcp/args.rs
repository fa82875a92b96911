//! `memscope mcp` arguments: flags, environment variables, `--repo auto` against real git
//! checkouts, refusals as one sentence with exit 2 — and a raw JSON-RPC session on the real
//! binary showing that the context reaches the tools and that malformed input does not end the
//! session. What runs the binary on a database runs on a SQLite file and again on PostgreSQL
//! (`…_on_postgres`).

use crate::support::mcp_session::{assert_rpc_error, tool_text, RawSession};
use crate::support::*;
use memscope::mcp::{repo_from_git, McpArgs, McpContext};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    output_ok(
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1"),
        &format!("git {args:?} (git is needed by the --repo auto tests)"),
    );
}

/// A fresh `git init` checkout at `<tmp>/<folder>`, with `origin` when given.
fn checkout(folder: &str, origin: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join(folder);
    std::fs::create_dir_all(dir.join("src/deep")).expect("mkdir");
    git(&dir, &["init", "-q"]);
    if let Some(url) = origin {
        git(&dir, &["remote", "add", "origin", url]);
    }
    (tmp, dir)
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

/// `$MEMSCOPE_SUBJECT`, `$MEMSCOPE_REPO`, `$MEMSCOPE_TASK` and `$MEMSCOPE_AGENT`, in that order.
fn every_variable(values: [&str; 4]) -> impl Fn(&str) -> Option<String> {
    let names = [
        "MEMSCOPE_SUBJECT",
        "MEMSCOPE_REPO",
        "MEMSCOPE_TASK",
        "MEMSCOPE_AGENT",
    ];
    let pairs: Vec<(&str, &str)> = names.into_iter().zip(values).collect();
    env_of(&pairs)
}

fn args(subject: Option<&str>, repo: Option<&str>, task: Option<&str>) -> McpArgs {
    McpArgs {
        subject: subject.map(str::to_string),
        repo: repo.map(str::to_string),
        task: task.map(str::to_string),
        ..McpArgs::default()
    }
}

// Opens no database: nothing to run on PostgreSQL.
#[test]
fn flags_win_over_environment_and_empty_variables_count_as_unset() {
    let cwd = std::env::temp_dir();
    let env = every_variable(["user:7", "from-env", "fix-1", "goose"]);
    let ctx = McpContext::resolve(&args(None, None, None), &env, &cwd).unwrap();
    assert_eq!(
        ctx,
        McpContext {
            subject: "user:7".into(),
            repo: Some("from-env".into()),
            task: Some("fix-1".into()),
            agent: Some("goose".into()),
            allow_forget: false,
            repo_note: None,
        }
    );
    let mut a = args(Some(" user:42 "), Some("legacy-dashboard"), Some("t-9"));
    a.agent = Some("claude-code".into());
    a.allow_forget = true;
    let ctx = McpContext::resolve(&a, &env, &cwd).unwrap();
    assert_eq!(ctx.subject, "user:42");
    assert_eq!(ctx.repo.as_deref(), Some("legacy-dashboard"));
    assert_eq!(ctx.task.as_deref(), Some("t-9"));
    assert_eq!(ctx.agent.as_deref(), Some("claude-code"));
    assert!(ctx.allow_forget);
    assert_eq!(ctx.describe(), "user:42 in repo:legacy-dashboard, task:t-9");

    let empty = every_variable(["user:1", "", "", ""]);
    let ctx = McpContext::resolve(&args(None, None, None), &empty, &cwd).unwrap();
    assert_eq!((ctx.repo, ctx.task, ctx.agent), (None, None, None));
}

// Opens no database: nothing to run on PostgreSQL.
#[test]
fn bad_context_is_refused_with_a_sentence_naming_its_origin() {
    let cwd = std::env::temp_dir();
    let none = env_of(&[]);
    let err = McpContext::resolve(&args(None, None, None), &none, &cwd).unwrap_err();
    assert!(
        err.contains("--subject") && err.contains("MEMSCOPE_SUBJECT"),
        "{err}"
    );
    let err = McpContext::resolve(&args(Some("  "), None, None), &none, &cwd).unwrap_err();
    assert!(err.starts_with("--subject"), "{err}");
    let err =
        McpContext::resolve(&args(Some("u"), Some("two words"), None), &none, &cwd).unwrap_err();
    assert!(
        err.starts_with("--repo") && err.contains("whitespace"),
        "{err}"
    );
    let err = McpContext::resolve(&args(Some("u"), Some(""), None), &none, &cwd).unwrap_err();
    assert!(err.contains("--repo is empty"), "{err}");
    // Past the id limit no `remember` could store it: refused before serving, naming where it
    // came from (found by review: the server started, and every write failed asking the model
    // to shorten an id only the host controls).
    let long = "长".repeat(171);
    for (a, from) in [
        (args(Some(&long), None, None), "--subject"),
        (args(Some("u"), Some(&long), None), "--repo"),
        (args(Some("u"), None, Some(&"t".repeat(513))), "--task"),
    ] {
        let err = McpContext::resolve(&a, &none, &cwd).unwrap_err();
        assert!(
            err.starts_with(from) && err.contains("512 bytes") && err.contains("shorten"),
            "{err}"
        );
    }
    // `--repo auto` never takes such a name: a long origin leaves the folder to name the
    // repository, and the note says why.
    let (_tmp, long_origin) = checkout(
        "f",
        Some(&format!("https://x/acme/{}.git", "a".repeat(600))),
    );
    let ctx =
        McpContext::resolve(&args(Some("u"), Some("auto"), None), &none, &long_origin).unwrap();
    assert_eq!(ctx.repo.as_deref(), Some("f"));
    let note = ctx.repo_note.unwrap();
    assert!(
        note.contains("its name is 600 bytes long") && !note.contains("one word"),
        "{note}"
    );
    let env = env_of(&[("MEMSCOPE_SUBJECT", "u"), ("MEMSCOPE_TASK", "a\tb")]);
    let err = McpContext::resolve(&args(None, None, None), &env, &cwd).unwrap_err();
    assert!(err.starts_with("$MEMSCOPE_TASK"), "{err}");
    assert_eq!(err.lines().count(), 1, "one sentence: {err}");
}

// Opens no database: nothing to run on PostgreSQL.
#[test]
fn repo_auto_takes_the_origin_remote_name() {
    for url in [
        "https://github.com/acme/legacy-dashboard.git",
        "git@github.com:acme/legacy-dashboard.git",
        "/srv/git/legacy-dashboard",
    ] {
        let (_tmp, dir) = checkout("checkout-folder", Some(url));
        assert_eq!(
            repo_from_git(&dir),
            Ok(("legacy-dashboard".to_string(), None)),
            "{url}"
        );
        // From a subdirectory too, and through the environment variable.
        let env = env_of(&[("MEMSCOPE_SUBJECT", "user:42"), ("MEMSCOPE_REPO", "auto")]);
        let ctx =
            McpContext::resolve(&args(None, None, None), &env, &dir.join("src/deep")).unwrap();
        assert_eq!(ctx.repo.as_deref(), Some("legacy-dashboard"));
    }
    // A percent-encoded address names the repository its checkout of the plain name does
    // (found by review: `%E7%BD%91%E7%AB%99` and `网站` were two places).
    for url in [
        "https://example.com/acme/%E7%BD%91%E7%AB%99.git",
        "https://example.com/acme/网站.git",
    ] {
        let (_tmp, dir) = checkout("checkout-folder", Some(url));
        assert_eq!(repo_from_git(&dir), Ok(("网站".to_string(), None)), "{url}");
    }
}

/// The working directory names the repository, whatever the host's environment points git at
/// (found by review: an inherited GIT_DIR named another checkout); and `--task auto` is said to
/// detect nothing rather than taken as a task named `auto`.
// Opens no database: nothing to run on PostgreSQL.
#[test]
fn repo_auto_reads_the_working_directory_not_an_inherited_git_dir() {
    let (_a, elsewhere) = checkout("elsewhere", Some("https://host/acme/elsewhere.git"));
    let (_b, here) = checkout("这里", Some("git@host:acme/网页-app.git"));
    let db = TestDb::new();
    let mut c = mcp_cmd(
        &db,
        &here.join("src"),
        &["--subject", "user:42", "--repo", "auto"],
    );
    c.env("GIT_DIR", elsewhere.join(".git"))
        .env("GIT_WORK_TREE", &elsewhere)
        .env("GIT_COMMON_DIR", elsewhere.join(".git"));
    let mut s = RawSession::start(c);
    s.initialize();
    let (code, stderr) = s.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("serving user:42 in repo:网页-app"),
        "{stderr}"
    );

    // A remote whose last component holds a colon names no repository: the folder does, and
    // the server says why.
    let (_c, odd) = checkout("odd-one", Some("/srv/git/task:x.git"));
    let (id, note) = repo_from_git(&odd).unwrap();
    assert_eq!(id, "odd-one");
    assert!(note.is_some_and(|n| n.contains("task:x")));

    let none = env_of(&[]);
    for task in ["auto", " auto "] {
        let err =
            McpContext::resolve(&args(Some("u"), None, Some(task)), &none, &here).unwrap_err();
        assert!(
            err.starts_with("--task auto: memscope cannot find the task by itself")
                && err.contains("task:auto"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let env = env_of(&[("MEMSCOPE_SUBJECT", "u"), ("MEMSCOPE_TASK", "auto")]);
    let err = McpContext::resolve(&args(None, None, None), &env, &here).unwrap_err();
    assert!(err.starts_with("$MEMSCOPE_TASK auto:"), "{err}");
    let ctx = McpContext::resolve(&args(Some("u"), None, Some("task:auto")), &none, &here).unwrap();
    assert_eq!(ctx.task.as_deref(), Some("auto"));
}

// Opens no database: nothing to run on PostgreSQL.
#[test]
fn repo_auto_falls_back_to_the_top_level_folder_name() {
    let (_tmp, dir) = checkout("web-app", None);
    assert_eq!(
        repo_from_git(&dir.join("src")),
        Ok(("web-app".to_string(), None))
    );
    // A remote whose URL leaves no usable name also falls back to the folder, and says so
    // (found by review: it did without a word).
    for url in ["https://example.com/acme/.git", "https://x/y/has space.git"] {
        let (_tmp2, dir2) = checkout("new-project", Some(url));
        let (id, note) = repo_from_git(&dir2).unwrap();
        assert_eq!(id, "new-project");
        let note = note.expect("a note");
        assert!(
            note.contains(url) && note.contains("the checkout's folder names it"),
            "{note}"
        );
        // The server says it where it starts.
        let db = TestDb::new();
        let mut s = RawSession::start(mcp_cmd(
            &db,
            &dir2,
            &["--subject", "user:42", "--repo", "auto"],
        ));
        s.initialize();
        let (code, stderr) = s.finish();
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stderr.contains("serving user:42 in repo:new-project") && stderr.contains(url),
            "{stderr}"
        );
    }
}

// Opens no database: nothing to run on PostgreSQL.
#[test]
fn repo_auto_outside_a_checkout_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let err = repo_from_git(tmp.path()).unwrap_err();
    assert!(
        err.contains("not inside a git repository") && err.contains("--repo ID"),
        "{err}"
    );
}

// ---- the real binary -------------------------------------------------------------------------

fn mcp_cmd(db: &TestDb, cwd: &Path, args: &[&str]) -> Command {
    let mut c = db.command(&["mcp"]);
    c.args(args)
        .current_dir(cwd)
        .env_remove("MEMSCOPE_SUBJECT")
        .env_remove("MEMSCOPE_REPO")
        .env_remove("MEMSCOPE_TASK")
        .env_remove("MEMSCOPE_AGENT");
    c
}

#[test]
fn the_binary_refuses_a_missing_subject_or_a_repo_it_cannot_find() {
    the_binary_refuses_a_missing_subject_or_a_repo_it_cannot_find_on(TestDb::new());
}

#[test]
fn the_binary_refuses_a_missing_subject_or_a_repo_it_cannot_find_on_postgres() {
    on_postgres(the_binary_refuses_a_missing_subject_or_a_repo_it_cannot_find_on);
}

fn the_binary_refuses_a_missing_subject_or_a_repo_it_cannot_find_on(db: TestDb) {
    let before = db.is_postgres().then(|| db.fingerprint());
    let tmp = tempfile::tempdir().unwrap();
    let run = |c: &mut Command| {
        let o = c.output().expect("spawn memscope mcp");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(&mut mcp_cmd(&db, tmp.path(), &[]));
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stdout, "", "nothing on the protocol stream");
    assert_one_sentence(&stderr, &["--subject", "MEMSCOPE_SUBJECT"]);

    let (code, _, stderr) = run(&mut mcp_cmd(
        &db,
        tmp.path(),
        &["--subject", "user:42", "--repo", "auto"],
    ));
    assert_eq!(code, 2, "{stderr}");
    assert_one_sentence(&stderr, &["--repo auto", "not inside a git repository"]);

    let (code, _, stderr) = run(mcp_cmd(&db, tmp.path(), &["--repo", "auto"])
        .env("MEMSCOPE_SUBJECT", "user:42")
        .env("MEMSCOPE_TASK", "has space"));
    assert_eq!(code, 2, "{stderr}");
    assert_one_sentence(&stderr, &["not inside a git repository"]);

    let (code, _, stderr) = run(&mut mcp_cmd(&db, tmp.path(), &["--bogus"]));
    assert_eq!(code, 2, "{stderr}");
    // A refused start creates no file, nor changes PostgreSQL (created by the fixture).
    match before {
        Some(before) => assert_eq!(db.fingerprint(), before, "a refused start changes nothing"),
        None => assert!(!db.path.exists(), "a refused start creates no database"),
    }
}

/// Found by review: in a checkout another user owns, git refuses every question ("dubious
/// ownership"), and `--repo auto` said the folder was not inside a git repository. It names
/// git's check and the way past it. Needs root, to give the checkout to another user.
#[test]
fn repo_auto_names_gits_ownership_check() {
    let db = TestDb::new();
    let (_tmp, dir) = checkout("别人的 checkout", Some("https://example.com/acme/web.git"));
    let given = Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    if !given {
        eprintln!("SKIPPED repo_auto_names_gits_ownership_check: chown to nobody needs root");
        return;
    }
    let o = mcp_cmd(
        &db,
        &dir.join("src"),
        &["--subject", "user:42", "--repo", "auto"],
    )
    .env("GIT_CONFIG_NOSYSTEM", "1")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_one_sentence(
        &stderr,
        &["another user owns it", "safe.directory", "--repo ID"],
    );
}

#[test]
fn repo_auto_reaches_the_tools_and_malformed_input_does_not_end_the_session() {
    repo_auto_reaches_the_tools_and_malformed_input_does_not_end_the_session_on(TestDb::new());
}

#[test]
fn repo_auto_reaches_the_tools_and_malformed_input_does_not_end_the_session_on_postgres() {
    on_postgres(repo_auto_reaches_the_tools_and_malformed_input_does_not_end_the_session_on);
}

fn repo_auto_reaches_the_tools_and_malformed_input_does_not_end_the_session_on(db: TestDb) {
    let (_tmp, dir) = checkout(
        "checkout-folder",
        Some("git@github.com:acme/legacy-dashboard.git"),
    );
    let mut cmd = mcp_cmd(&db, &dir.join("src"), &["--repo", "auto"]);
    cmd.env("MEMSCOPE_SUBJECT", "user:42");
    let mut s = RawSession::start(cmd);
    let init = s.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "memscope", "{init}");
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("user:42 in repo:legacy-dashboard"),
        "{instructions}"
    );

    // Not JSON at all, then JSON that is not a valid request: neither ends the session.
    s.send_raw("this is not json {");
    s.send_raw(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"oops"}"#);
    // Arguments of the wrong types: a tool error the model can read, not a protocol failure.
    let bad = s.request(
        3,
        "tools/call",
        json!({"name": "remember", "arguments": {"predicate": ["a"], "value": "npm", "source": "s", "scope": "repo"}}),
    );
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(
        tool_text(&bad).contains("`predicate` must be a string"),
        "{bad}"
    );
    // null is said once.
    let null = s.request(
        30,
        "tools/call",
        json!({"name": "remember", "arguments": {"predicate": null, "value": "npm", "source": "s", "scope": "global"}}),
    );
    assert!(
        tool_text(&null).contains("`predicate` must be a string, got null")
            && !tool_text(&null).contains("null null"),
        "{null}"
    );

    // `scope: repo` is the repository found by --repo auto, never one named by the model.
    let ok = s.request(
        4,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "package_manager", "value": "npm", "scope": "repo",
            "raw": "这个仓库保持 npm ci", "source": "thread:23/message:14"}}),
    );
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    assert_eq!(
        ok["result"]["structuredContent"]["scope"],
        "repo:legacy-dashboard"
    );
    let listed = s.request(5, "tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["remember", "recall", "list_memories"]);
    let recall = s.request(
        6,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "package-manager"}}),
    );
    assert_eq!(
        recall["result"]["structuredContent"]["value"], "npm",
        "{recall}"
    );
    let (code, stderr) = s.finish();
    assert_eq!(code, 0, "a closed connection is a normal end: {stderr}");
    assert!(
        stderr.contains("serving user:42 in repo:legacy-dashboard"),
        "{stderr}"
    );

    // The write went through the write path, and the read was logged under the client's name.
    let list = db.list(&[]);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["scope"], "repo:legacy-dashboard");
    assert_eq!(list[0]["raw"], "这个仓库保持 npm ci");
    let reads = as_array(db.json(&["reads", "--json"]));
    assert_eq!(reads[0]["agent"], "raw-test-client");
    db.assert_check_ok();
}

/// Found by review: `list_memories` answered 20,000 memories in one 13.7 MB reply. A page holds
/// whole predicates, at most 100 of them and about 256 KB; `after` pages on, and a predicate's
/// shadowed records never split across pages.
#[test]
fn list_memories_pages_a_long_list_by_whole_predicates() {
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    let db = TestDb::new();
    let line = |p: String, v: String, scope: &str| {
        json!({"subject": "user:42", "predicate": p, "value": v, "scope": scope, "source": "s"})
            .to_string()
    };
    let mut input = String::new();
    for i in 0..230 {
        input += &line(format!("偏好_{i:03}"), format!("值 {i} 📦"), "global");
        input.push('\n');
        if i % 2 == 0 {
            input += &line(format!("偏好_{i:03}"), format!("仓库 {i}"), "repo:网页");
            input.push('\n');
        }
    }
    db.run_stdin(&["apply", "-"], input.as_bytes()).ok();
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(
        &db,
        tmp.path(),
        &["--subject", "user:42", "--repo", "网页"],
    ));
    s.initialize();
    let mut seen = Vec::new();
    let mut after = None;
    for (page, (want, more)) in [(100, 130), (100, 30), (30, 0)].into_iter().enumerate() {
        let args = match &after {
            Some(a) => json!({ "after": a }),
            None => json!({}),
        };
        let r = s.request(10 + page as i64, "tools/call", call("list_memories", args));
        let data = &r["result"]["structuredContent"];
        // The whole answer when it is not a list (one flaky run under load had none; say what
        // the server answered instead).
        let items = data["memories"]
            .as_array()
            .unwrap_or_else(|| panic!("page {page}: no list of memories in the answer: {r}"));
        let preds: Vec<&str> = items
            .iter()
            .filter(|m| m["applies"] == true)
            .map(|m| m["predicate"].as_str().unwrap())
            .collect();
        assert_eq!(
            (preds.len(), data["more_predicates"].as_u64()),
            (want, Some(more)),
            "page {page}"
        );
        // Every repo record's global one is on the same page, right after it.
        for (i, m) in items.iter().enumerate() {
            if m["scope"] == "repo:网页" {
                assert_eq!(items[i + 1]["predicate"], m["predicate"], "page {page}");
            }
        }
        seen.extend(preds.iter().map(|p| p.to_string()));
        let text = tool_text(&r);
        if more > 0 {
            let next = data["next_after"].as_str().unwrap();
            assert_eq!(next, *preds.last().unwrap());
            assert!(
                text.contains(&format!("… and {more} more predicate(s)")),
                "{text}"
            );
            after = Some(next.to_string());
        } else {
            assert!(data["next_after"].is_null(), "{data}");
            assert!(!text.contains("more predicate"), "{text}");
        }
    }
    let all: Vec<String> = (0..230).map(|i| format!("偏好_{i:03}")).collect();
    assert_eq!(seen, all);
    let r = s.request(
        20,
        "tools/call",
        call("list_memories", json!({"after": "偏好_999"})),
    );
    assert!(tool_text(&r).contains("none after 偏好_999"), "{r}");

    // Large values end a page sooner: three of 100 KB pass 256 KB.
    let big = TestDb::new();
    let mut input = String::new();
    for i in 0..5 {
        input += &line(format!("big_{i}"), "长".repeat(100_000 / 3), "global");
        input.push('\n');
    }
    big.run_stdin(&["apply", "-"], input.as_bytes()).ok();
    let mut s = RawSession::start(mcp_cmd(&big, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    let r = s.request(2, "tools/call", call("list_memories", json!({})));
    let data = &r["result"]["structuredContent"];
    assert_eq!(
        data["memories"].as_array().unwrap().len(),
        3,
        "{}",
        data["next_after"]
    );
    assert_eq!(
        (
            data["more_predicates"].as_u64(),
            data["next_after"].as_str()
        ),
        (Some(2), Some("big_2"))
    );
}

/// Found by review: a request reusing the id of a call still running was taken for that call
/// (and the end of input stopped waiting for it). It is refused by its id at once, nothing of it
/// runs, and the first call is answered as usual. (SQLite only: a Python client holds the
/// write lock so that the first call is still running.)
#[test]
fn a_request_reusing_a_running_calls_id_is_refused() {
    let db = TestDb::new();
    db.write("user:42", "编辑器", "helix", "global", "s");
    let script = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
c.execute("BEGIN IMMEDIATE")
print("LOCKED", flush=True)
sys.stdin.readline()
c.execute("ROLLBACK")
"#;
    let mut holder = PyHolder::start(script, &db.path);
    assert_eq!(holder.line().trim(), "LOCKED");
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    let remember = |value: &str| {
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "remember",
            "arguments": {"predicate": "包管理器", "value": value, "scope": "global", "source": "t"}}})
    };
    s.send(remember("pnpm 📦"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.send(remember("yarn 🧶"));
    let (refused, _) = s.until_id(5);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("belongs to a call still running"),
        "{refused}"
    );
    // The refusal answers by the running call's id but must not free it: the end of input
    // still waits for that call, past the five seconds rmcp writes answers after its input ends
    // (the refusal freed it until 2026-12-03, and this answer was lost).
    s.close_stdin();
    std::thread::sleep(std::time::Duration::from_secs(6));
    holder.say("go");
    let (first, _) = s.until_id(5);
    assert_eq!(
        first["result"]["structuredContent"]["outcome"], "inserted",
        "{first}"
    );
    drop(s);
    let stored = db.list(&["--subject", "user:42"]);
    let values: Vec<&Value> = stored
        .iter()
        .filter(|r| r["predicate"] == "package_manager")
        .map(|r| &r["value"])
        .collect();
    assert_eq!(values, [&json!("pnpm 📦")], "{stored:?}");
}

/// Found by a flaky run: the server noted an answer's id free only after writing the answer, so
/// a client that read it and at once sent its next request under the same id (as the test
/// below did with `initialize`'s id) was refused as reusing a running call's id. An id is free
/// once its answer is on the way: each of many back-to-back reuses is served.
#[test]
fn an_id_is_free_again_once_its_answer_is_written() {
    let db = TestDb::new();
    db.write("user:42", "编辑器", "helix 🧬", "global", "s");
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    for round in 0..300 {
        let r = s.request(
            7,
            "tools/call",
            json!({"name": "recall", "arguments": {"predicate": "编辑器"}}),
        );
        assert_eq!(
            r["result"]["structuredContent"]["value"], "helix 🧬",
            "round {round}: {r}"
        );
    }
}

// SQLite only: a purge truncating the WAL while a session idles, the words looked for on disk.
#[test]
fn the_server_holds_no_read_transaction_while_idle() {
    // A delete elsewhere must be able to truncate the WAL while a session sits idle.
    let db = TestDb::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(
        &db,
        tmp.path(),
        &["--subject", "user:42", "--repo", "web-app"],
    ));
    s.initialize();
    let secret = unique("secret-words-");
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "coffee", "value": "oat latte", "scope": "global",
            "raw": secret, "source": "thread:40"}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = s.request(
        3,
        "tools/call",
        json!({"name": "list_memories", "arguments": {}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let deleted = db.run(&args_for("delete", "user:42", "coffee", &["--yes"]));
    let deleted = deleted.ok();
    assert!(
        !deleted.stderr.contains("pending"),
        "the idle server blocked the purge: {}",
        deleted.stderr
    );
    assert_eq!(find_on_disk(&db.path, &secret), Vec::<String>::new());
    // Still serving, and the deleted memory stays deleted for the agent.
    let r = s.request(
        4,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "coffee", "value": "espresso", "scope": "global", "source": "thread:41"}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "rejected",
        "{r}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
}

/// `[[…[1]…]]`, `levels` deep.
fn nested(levels: usize) -> Value {
    deep_json(&format!("{}1{}", "[".repeat(levels), "]".repeat(levels)))
}

/// `text` as JSON, however deep (serde_json stops at 128 levels by default).
fn deep_json(text: &str) -> Value {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    serde::Deserialize::deserialize(&mut de).expect("nested JSON")
}

#[test]
fn every_request_gets_an_answer_however_deep_or_misshapen() {
    every_request_gets_an_answer_however_deep_or_misshapen_on(TestDb::new());
}

#[test]
fn every_request_gets_an_answer_however_deep_or_misshapen_on_postgres() {
    on_postgres(every_request_gets_an_answer_however_deep_or_misshapen_on);
}

fn every_request_gets_an_answer_however_deep_or_misshapen_on(db: TestDb) {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    let remember = |predicate: &str, value: Value| {
        json!({"name": "remember", "arguments": {
            "predicate": predicate, "value": value, "scope": "global", "source": "thread:9"}})
    };
    // 127 levels is what memscope reads back, so it is stored.
    let r = s.request(2, "tools/call", remember("deep_ok", nested(127)));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["structuredContent"]["outcome"], "inserted");
    // Deeper values were dropped unanswered; now each is a tool error naming the limit.
    let mut id = 3;
    for levels in [128, 200, 5_000] {
        let r = s.request(id, "tools/call", remember("deep_no", nested(levels)));
        assert_eq!(r["result"]["isError"], true, "{levels}: {r}");
        assert!(
            tool_text(&r).contains("at most 127 levels"),
            "{levels}: {r}"
        );
        id += 1;
    }
    let mut obj = json!("x");
    for _ in 0..200 {
        obj = json!({ "a": obj });
    }
    let r = s.request(id, "tools/call", remember("deep_obj", obj));
    assert_eq!(r["result"]["isError"], true, "{r}");
    id += 1;
    // Arguments that are not an object: invalid params, not "method not found".
    for args in [json!("predicate=pm"), json!(["pm"]), json!(3)] {
        let r = s.request(
            id,
            "tools/call",
            json!({"name": "remember", "arguments": args}),
        );
        assert_rpc_error(&r, -32602, "`arguments` must be an object");
        id += 1;
    }
    // An empty `raw` is no words, as in `write` and `apply`.
    let r = s.request(
        id,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "editor", "value": "helix", "scope": "global", "source": "thread:9", "raw": ""}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    // A batch (protocol 2025-03-26): each request served and answered on its own line.
    s.send_raw(&format!(
        "[{}, {}]",
        json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": remember("shell", json!("fish 🐟"))}),
        json!({"jsonrpc": "2.0", "id": 51, "method": "ping"})
    ));
    let (r, earlier) = s.until_id(50);
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    // The ping's answer may come first.
    let r = match earlier.into_iter().find(|m| m["id"] == 51) {
        Some(r) => r,
        None => s.until_id(51).0,
    };
    assert!(r.get("result").is_some(), "{r}");
    // An empty batch and requests whose id is no id are answered with id null, as JSON-RPC
    // 2.0 requires (a member left out, the Python SDK drops the answer).
    s.send_raw("[]");
    for id in ["true", "{}", "1.5", "null"] {
        s.send_raw(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
    }
    let (_, before) = s.request_collecting(52, "ping", json!({}));
    let unanswerable: Vec<&Value> = before
        .iter()
        .filter(|m| m.get("id") == Some(&Value::Null))
        .collect();
    assert!(before.iter().all(|m| m.get("id").is_some()), "{before:?}");
    assert_eq!(unanswerable.len(), 5, "{before:?}");
    for m in &unanswerable {
        assert_eq!(m["error"]["code"], -32600, "{m}");
    }
    assert!(unanswerable[1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not a string or an integer"));
    // Half an emoji (a lone surrogate, what a host that cut a string sends): a tool error that
    // says so, not advice about numbers.
    s.send_raw(r#"{"jsonrpc":"2.0","id":53,"method":"tools/call","params":{"name":"remember","arguments":{"predicate":"emoji","value":"\ud83d","scope":"global","source":"thread:9"}}}"#);
    let (r, _) = s.until_id(53);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(tool_text(&r).contains("half of an emoji"), "{r}");
    let (code, _) = s.finish();
    assert_eq!(code, 0);

    // (`list --json` prints the deep value 129 levels deep: past serde_json's default limit.)
    let listed = deep_json(&db.run(&["list", "--json"]).ok().stdout);
    let rows: Vec<(&Value, &Value, &Value)> = listed
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|r| (&r["predicate"], &r["raw"], &r["value"]))
        .collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0].0, "deep_ok");
    assert_eq!(rows[0].2, &nested(127));
    assert_eq!(
        (rows[1].0, rows[1].1),
        (&Value::from("editor"), &Value::Null)
    );
    assert_eq!((rows[2].0, rows[2].2), (&json!("shell"), &json!("fish 🐟")));
    db.assert_check_ok();
}

#[test]
fn an_integer_past_64_bits_is_a_tool_error_not_a_rounded_memory() {
    integer_past_64_bits_on(TestDb::new());
}

#[test]
fn an_integer_past_64_bits_is_a_tool_error_not_a_rounded_memory_on_postgres() {
    on_postgres(integer_past_64_bits_on);
}

fn integer_past_64_bits_on(db: TestDb) {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    // Sent as text: a JSON library on this side would round it before it left.
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember","arguments":{"predicate":"ticket","value":{"id":12345678901234567890123},"scope":"global","source":"thread:9"}}}"#,
    );
    let (r, _) = s.until_id(2);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = tool_text(&r);
    assert!(
        text.contains("12345678901234567890123") && text.contains("send it as a string"),
        "{text}"
    );
    // The same value at the edge of 64 bits is stored exactly.
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"remember","arguments":{"predicate":"ticket","value":{"id":18446744073709551615},"scope":"global","source":"thread:9"}}}"#,
    );
    let (r, _) = s.until_id(3);
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    // A number past a double's range is not JSON serde_json reads: still answered, by id.
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"remember","arguments":{"predicate":"ticket","value":1e400,"scope":"global","source":"thread:9"}}}"#,
    );
    let (r, _) = s.until_id(4);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(tool_text(&r).contains("within a double's range"), "{r}");
    // An id that is such an integer cannot be echoed: the error comes with id null.
    s.send_raw(r#"{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"}"#);
    s.send_raw(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
    let (_, before) = s.until_id(5);
    assert!(
        before.iter().any(|m| m.get("id") == Some(&Value::Null)
            && m["error"]["message"]
                .as_str()
                .is_some_and(|t| t.contains("12345678901234567890123"))),
        "{before:?}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    let listed = db.run(&["list", "--json"]).ok().stdout;
    assert!(listed.contains("\"id\": 18446744073709551615"), "{listed}");
    assert_eq!(listed.matches("\"predicate\"").count(), 1, "{listed}");
}

#[test]
fn remember_past_the_id_limit_is_a_tool_error_in_the_clis_sentence() {
    remember_past_the_id_limit_on(TestDb::new());
}

#[test]
fn remember_past_the_id_limit_is_a_tool_error_in_the_clis_sentence_on_postgres() {
    on_postgres(remember_past_the_id_limit_on);
}

fn remember_past_the_id_limit_on(db: TestDb) {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    let remember = |predicate: String| json!({"name": "remember", "arguments": {"predicate": predicate, "value": "v", "scope": "global", "source": "thread:9"}});
    let r = s.request(2, "tools/call", remember("长".repeat(171)));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        tool_text(&r),
        "remember failed, nothing was written: predicate is 513 bytes long; memscope keeps subjects, predicates and scope ids to at most 512 bytes of UTF-8 (about 170 Chinese characters): shorten it"
    );
    // At the limit it is remembered.
    let r = s.request(3, "tools/call", remember(format!("ab{}", "长".repeat(170))));
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    assert_eq!(db.list(&[]).len(), 1);
}

#[test]
fn scope_kinds_in_any_case_stored_spellings_and_escaped_texts() {
    scope_kinds_in_any_case_stored_spellings_and_escaped_texts_on(TestDb::new());
}

#[test]
fn scope_kinds_in_any_case_stored_spellings_and_escaped_texts_on_postgres() {
    on_postgres(scope_kinds_in_any_case_stored_spellings_and_escaped_texts_on);
}

/// The scope's kind is read in any case, as in every command; `list_memories` names the subject
/// and places as stored, not as this host typed them; and what was stored — a value, a source —
/// reaches the tool's text with its direction controls and invisible characters escaped, as
/// every CLI command prints it.
fn scope_kinds_in_any_case_stored_spellings_and_escaped_texts_on(db: TestDb) {
    db.write("User:42", "editor", "helix", "repo:Web-App", "s:0");
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(
        &db,
        tmp.path(),
        &[
            "--subject",
            "USER:42",
            "--repo",
            "WEB-APP",
            "--allow-forget",
        ],
    ));
    let init = s.initialize();
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("You serve User:42 in repo:Web-App"),
        "{init}"
    );
    let call = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    let r = s.request(
        2,
        "tools/call",
        call(
            "remember",
            json!({"predicate": "shell", "value": "npm\u{202E}ic\u{200B}", "scope": "Global",
                   "source": "thread:\u{202E}9"}),
        ),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    let text = tool_text(&r);
    assert!(text.contains(r"npm\u202eic\u200b"), "{text}");
    let r = s.request(
        3,
        "tools/call",
        call(
            "remember",
            json!({"predicate": "pm", "value": "pnpm", "scope": " REPO ", "source": "s"}),
        ),
    );
    assert_eq!(
        r["result"]["structuredContent"]["scope"], "repo:Web-App",
        "{r}"
    );
    let r = s.request(
        4,
        "tools/call",
        call("recall", json!({"predicate": "shell"})),
    );
    let text = tool_text(&r);
    assert!(
        text.contains(r"npm\u202eic\u200b") && text.contains(r"thread:\u{202e}9"),
        "{text}"
    );
    assert!(
        !text.contains('\u{202E}') && !text.contains('\u{200B}'),
        "{text}"
    );
    let r = s.request(5, "tools/call", call("list_memories", json!({})));
    let listed = &r["result"]["structuredContent"];
    assert_eq!(
        (&listed["subject"], &listed["repo"]),
        (&json!("User:42"), &json!("Web-App")),
        "{r}"
    );
    assert_eq!(listed["scopes"], json!(["repo:Web-App", "global"]), "{r}");
    let text = tool_text(&r);
    assert!(
        text.starts_with("Memories of User:42 in repo:Web-App"),
        "{text}"
    );
    assert!(!text.contains('\u{202E}'), "{text}");
    // A scope it does not know is echoed escaped too.
    let r = s.request(
        6,
        "tools/call",
        call(
            "remember",
            json!({"predicate": "pm", "value": "x", "scope": "repo\u{202E}", "source": "s"}),
        ),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(tool_text(&r).contains(r"repo\u202e"), "{r}");
    let r = s.request(
        8,
        "tools/call",
        call(
            "remember",
            json!({"predicate": "pm", "value": "x", "scope": "repo:X", "source": "s"}),
        ),
    );
    assert!(tool_text(&r).contains("(User:42 in repo:Web-App)"), "{r}");
    // The JSON text block, for hosts that show only text, escapes them as `--json` does.
    let r = s.request(
        9,
        "tools/call",
        call("recall", json!({"predicate": "shell"})),
    );
    let block = r["result"]["content"][1]["text"].as_str().unwrap();
    assert!(
        block.contains(r"npm\u202eic\u200b") && !block.contains('\u{202E}'),
        "{block}"
    );
    let r = s.request(
        7,
        "tools/call",
        call("forget", json!({"predicate": "pm", "scope": "ALL"})),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let (code, stderr) = s.finish();
    assert_eq!(code, 0);
    // The line the host's log shows names them as the answers do (found by review: it said
    // `USER:42 in repo:WEB-APP`).
    assert!(
        stderr.contains("memscope mcp: serving User:42 in repo:Web-App on stdio"),
        "{stderr}"
    );
    db.assert_check_ok();
}

/// A client that closes its end while a call waits on another process's write lock (here for
/// 7 s, longer than the 5 s rmcp keeps answering after its input ends) still gets the call's
/// answer before the server exits, and the answer says what the database holds.
#[test]
fn a_call_running_when_the_client_closes_stdin_is_answered_before_the_server_exits() {
    let db = TestDb::new();
    db.write("user:42", "editor", "helix", "global", "s:0");
    let tmp = tempfile::tempdir().unwrap();
    let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]));
    s.initialize();
    let holder = rusqlite::Connection::open(&db.path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    s.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "remember", "arguments": {
            "predicate": "shell", "value": "fish 🐟", "scope": "global", "source": "s:1"}}}),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.close_stdin();
    std::thread::sleep(std::time::Duration::from_secs(7));
    holder.execute_batch("COMMIT").unwrap();
    let (r, _) = s.until_id(2);
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "inserted",
        "{r}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    let listed = db.list(&["--scope", "global"]);
    assert!(listed.iter().any(|m| m["value"] == "fish 🐟"), "{listed:?}");
    db.assert_check_ok();
}

/// A client that sends its whole handshake at once, with a refused `initialize`: the
/// `notifications/initialized` after it is dropped (it ended rmcp's handshake), every request
/// is answered — the `initialize` naming its wrong field — and the server exits when the
/// client closes its input, saying no session began (found by an exploratory test: the call
/// was never answered and the server lived 120 s after the client closed its input).
#[test]
fn a_refused_initialize_sent_with_the_rest_of_the_handshake_leaves_nothing_unanswered() {
    let db = TestDb::new();
    for _ in 0..3 {
        let mut s = RawSession::serve_uninitialized(db.path_str(), &["--subject", "user:42"], &[]);
        s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}));
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s.send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "recall", "arguments": {"predicate": "编辑器"}}}),
        );
        s.close_stdin();
        let (init, _) = s.until_id(1);
        assert_rpc_error(&init, -32602, "its `protocolVersion` is missing");
        // Answered — by rmcp, which may serve a call sent before any session (MCP's stateless
        // requests), or here, as never run.
        let (call, _) = s.until_id(2);
        assert!(
            call.get("error").is_some() || call.get("result").is_some(),
            "{call}"
        );
        let (code, stderr) = s.finish();
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains("ignored notifications/initialized"),
            "{stderr}"
        );
        assert!(
            stderr.contains("closed its input before the server accepted an `initialize`"),
            "{stderr}"
        );
    }
}

/// A refused `initialize` leaves the session open for a valid one: the handshake after it
/// begins the session, and calls are served.
#[test]
fn a_session_begins_after_a_refused_initialize() {
    let db = TestDb::new();
    db.write("user:42", "编辑器", "helix 🧬", "global", "s:0");
    let mut s = RawSession::serve_uninitialized(db.path_str(), &["--subject", "user:42"], &[]);
    s.send(
        json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": null, "version": "0"}}}),
    );
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let (refused, _) = s.until_id(7);
    assert_rpc_error(
        &refused,
        -32602,
        "its `clientInfo.name` is null, not a string",
    );
    let init = s.initialize();
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
    let call = s.request(
        2,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "编辑器"}}),
    );
    assert!(tool_text(&call).contains("helix 🧬"), "{call}");
    let (code, stderr) = s.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// A method memscope does not serve is answered with a sentence naming it (rmcp's own answer
/// was the bare method name — found by review), a method MCP names as well as a made-up one.
#[test]
fn a_method_memscope_does_not_serve_is_named_in_a_sentence() {
    let db = TestDb::new();
    let mut s = RawSession::serve(db.path_str(), &["--subject", "user:42"]);
    s.initialize();
    for (id, method) in [(2, "nope"), (3, "resources/list"), (4, "prompts/get")] {
        let answer = s.request(id, method, json!({}));
        assert_rpc_error(
            &answer,
            -32601,
            &format!("memscope serves no method \"{method}\""),
        );
        assert_rpc_error(
            &answer,
            -32601,
            "it serves initialize, ping, tools/list and tools/call",
        );
    }
    let (code, stderr) = s.finish();
    assert_eq!(code, 0, "{stderr}");
}

/// A client that stops reading (closes its end of the server's stdout) and then its input: the
/// server says so in one line and exits by itself — found by review, it was killed by SIGPIPE
/// without a word.
#[test]
fn a_client_that_stops_reading_gets_a_server_that_says_so_and_exits() {
    use std::io::Write;
    let db = TestDb::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = mcp_cmd(&db, tmp.path(), &["--subject", "user:42"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let mut text = String::from(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    text.push('\n');
    text.push_str(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    text.push('\n');
    for id in 2..40 {
        text.push_str(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "remember", "arguments": {
                "predicate": format!("p{id}"), "value": "值 🐟", "scope": "global", "source": "s:1"}}}).to_string());
        text.push('\n');
    }
    // The server may be gone by the end of the input: a refused write is fine.
    let _ = stdin.write_all(text.as_bytes());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "ended by a signal? {:?} {stderr}",
        out.status
    );
    assert!(
        stderr.contains("the client stopped reading answers"),
        "{stderr}"
    );
    db.assert_check_ok();
}

/// Calls a host sends at once take turns; one the host cancels (`notifications/cancelled`)
/// while it still waits for its turn never starts — nothing of it is stored — and the call
/// holding the turn answers as ever (found by review: four cancelled calls, queued behind a
/// call waiting on another process's lock, were all stored).
#[test]
fn a_call_cancelled_while_it_waits_for_its_turn_never_runs() {
    let db = TestDb::new();
    db.run(&["init"]).ok();
    let mut s = RawSession::serve(db.path_str(), &["--subject", "用户:42"]);
    // Another process holds the write lock: the first call waits for it, the rest for it.
    let blocker = rusqlite::Connection::open(&db.path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    for id in 2..=6 {
        s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "remember", "arguments": {"predicate": format!("偏好{id}"), "value": format!("值 {id} 🎯"),
            "scope": "global", "source": format!("thread:{id}")}}}));
    }
    for id in 3..=6 {
        s.send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the user pressed Esc"}}),
        );
    }
    // The server reads in order: once the ping is answered, every cancel was taken.
    let (pong, _) = s.request_collecting(7, "ping", json!({}));
    assert!(pong.get("result").is_some(), "{pong}");
    blocker.execute_batch("COMMIT").unwrap();
    let (first, _) = s.until_id(2);
    assert_eq!(
        first["result"]["structuredContent"]["outcome"], "inserted",
        "{first}"
    );
    // A call after them all runs as ever, and the answers of the cancelled ones never come.
    let (last, before) = s.request_collecting(
        8,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": "偏好2"}}),
    );
    assert_eq!(last["result"]["isError"], false, "{last}");
    assert!(
        before
            .iter()
            .all(|m| !(3..=6).contains(&m["id"].as_i64().unwrap_or(0))),
        "{before:?}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    let stored: Vec<String> = db
        .list(&[])
        .iter()
        .map(|m| m["predicate"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        stored,
        ["偏好2"],
        "only the call that was not cancelled is stored"
    );
}

#[test]
fn calls_sent_at_once_run_in_the_order_they_were_sent() {
    calls_sent_at_once_run_in_order_on(TestDb::new());
}

#[test]
fn calls_sent_at_once_run_in_the_order_they_were_sent_on_postgres() {
    on_postgres(calls_sent_at_once_run_in_order_on);
}

/// A host's parallel tool calls take turns in the order they arrived, not in whichever order
/// the server's threads reach its store (found by the clean-clone CI: a `recall` sent second
/// ran first): `remember`s of one memory sent at once, in one write, become its versions in
/// the order sent, and each is told the version it made.
fn calls_sent_at_once_run_in_order_on(db: TestDb) {
    db.run(&["init"]).ok();
    let mut s = RawSession::serve(db.path_str(), &["--subject", "用户:42"]);
    let ids: Vec<i64> = (2..=31).collect();
    let lines: Vec<String> = ids
        .iter()
        .map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "remember", "arguments": {"predicate": "包管理器",
                "value": format!("pnpm {id} 📦"), "scope": "global", "source": format!("turn:{id}")}}})
            .to_string()
        })
        .collect();
    s.send_raw(&lines.join("\n"));
    // The answers themselves may come in any order (MCP promises none): each tells the version
    // its call made.
    let mut answers: HashMap<i64, Value> = HashMap::new();
    for id in &ids {
        if !answers.contains_key(id) {
            let (answer, before) = s.until_id(*id);
            answers.extend(
                before
                    .into_iter()
                    .chain([answer])
                    .map(|m| (m["id"].as_i64().unwrap(), m)),
            );
        }
    }
    for id in &ids {
        let told = &answers[id]["result"]["structuredContent"];
        let outcome = if *id == 2 { "inserted" } else { "superseded" };
        assert_eq!(
            (told["outcome"].as_str(), told["version"].as_i64()),
            (Some(outcome), Some(id - 1)),
            "{id}: {told}"
        );
    }
    let (code, stderr) = s.finish();
    assert_eq!(code, 0, "{stderr}");
    let versions: Vec<String> = db
        .history("用户:42", "包管理器", Some("global"))
        .iter()
        .map(|e| e["value"].as_str().unwrap().to_string())
        .collect();
    let sent: Vec<String> = ids.iter().map(|id| format!("pnpm {id} 📦")).collect();
    assert_eq!(versions, sent, "the versions in the order sent");
    db.assert_check_ok();
}

#[test]
fn recall_of_a_long_name_is_logged() {
    recall_of_a_long_name_on(TestDb::new());
}

/// Found by review: PostgreSQL refused to log a read whose subject and predicate ran past its
/// index entry of about 2,700 bytes, so `recall` failed for its name's length there alone;
/// from PostgreSQL schema 10 the read log is indexed by their digests.
#[test]
fn recall_of_a_long_name_is_logged_on_postgres() {
    on_postgres(recall_of_a_long_name_on);
}

/// `recall` logs its read whatever the length of the name it asks for: a predicate kilobytes
/// long, and a served subject at the id limit (a mistyped one: no memory applies).
fn recall_of_a_long_name_on(db: TestDb) {
    db.write("u:42", "editor", "helix", "global", "s");
    // A served subject is held to the id limit (`mcp` refuses a longer one before serving).
    let subject = format!("u:{}", incompressible(500, 7));
    let predicate = incompressible(3_000, 8);
    let tmp = tempfile::tempdir().unwrap();
    for (served, asked) in [("u:42", predicate.as_str()), (subject.as_str(), "editor")] {
        let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", served]));
        s.initialize();
        let r = s.request(
            2,
            "tools/call",
            json!({"name": "recall", "arguments": {"predicate": asked}}),
        );
        assert_ne!(r["result"]["isError"], true, "{r}");
        assert_eq!(
            r["result"]["structuredContent"]["value"],
            Value::Null,
            "{r}"
        );
        let (code, stderr) = s.finish();
        assert_eq!(code, 0, "{stderr}");
    }
    let reads = as_array(db.json(&["reads", "--json"]));
    let names: Vec<(&str, &str, &str)> = reads
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap();
            (text("agent"), text("subject"), text("predicate"))
        })
        .collect();
    assert_eq!(
        names,
        [
            ("raw-test-client", subject.as_str(), "editor"),
            ("raw-test-client", "u:42", predicate.as_str()),
        ]
    );
    let found = as_array(db.json(&["reads", "--predicate", &predicate, "--json"]));
    assert_eq!(found.len(), 1, "{found:?}");
    db.assert_check_ok();
}

/// A client that names itself with control characters (or at length) has its reads logged
/// under that name escaped and cut — not a NUL PostgreSQL refuses (every `recall` failed there,
/// found by review) or a SQLite row an export cannot move.
#[test]
fn a_clients_own_name_is_logged_escaped_and_cut() {
    a_clients_own_name_is_logged_escaped_and_cut_on(TestDb::new());
}

#[test]
fn a_clients_own_name_is_logged_escaped_and_cut_on_postgres() {
    on_postgres(a_clients_own_name_is_logged_escaped_and_cut_on);
}

fn a_clients_own_name_is_logged_escaped_and_cut_on(db: TestDb) {
    db.write("user:名", "editor", "vim", "global", "thread:0/message:1");
    for (name, logged) in [
        ("a\u{0}b\u{1b}[2J", "a\\0b\\u{1b}[2J".to_string()),
        (&*"助手🤖".repeat(60), format!("{}…", "助手🤖".repeat(33))),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = RawSession::start(mcp_cmd(&db, tmp.path(), &["--subject", "user:名"]));
        s.initialize_as(name);
        let r = s.request(
            2,
            "tools/call",
            json!({"name": "recall", "arguments": {"predicate": "editor"}}),
        );
        assert_eq!(r["result"]["isError"], false, "{r}");
        let (code, stderr) = s.finish();
        assert_eq!(code, 0, "{stderr}");
        let reads = db.json(&["reads", "--limit", "1", "--json"]);
        assert_eq!(reads[0]["agent"], json!(logged), "{reads}");
    }
    db.assert_check_ok();
}

/// A host that closed the server's stderr (nothing reads its log) is still served: the log's
/// lines are lost, not the session (it ended with Rust's panic status, 101, found by review).
#[test]
fn a_server_whose_stderr_is_closed_still_serves() {
    let db = TestDb::new();
    let tmp = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut c = mcp_cmd(&db, tmp.path(), &["--subject", "user:42"]);
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(writer)
        .spawn()
        .expect("spawn memscope mcp");
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "remember", "arguments": {"predicate": "editor", "value": "helix 🧬",
            "scope": "global", "source": "thread:1/message:1"}}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    // The answer to the write comes before the client leaves.
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let answered = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("\"id\":2"));
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "answered: {answered:?}");
    let answered = answered.expect("an answer to the write");
    assert!(answered.contains("inserted"), "{answered}");
    assert_eq!(db.list(&[])[0]["value"], "helix 🧬");
}
