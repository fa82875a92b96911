//! `memscope mcp` driven by a client that is not ours: the official Python MCP SDK
//! (`pip install mcp`) runs `tests/mcp_client.py` over stdio — initialize, list tools, remember,
//! recall, list_memories, forget, malformed calls. Then the database it left is compared with one
//! built by the equivalent `memscope write` / `delete` commands: the MCP server writes exactly
//! what the CLI writes (identities, values, versions, scopes, sources, raw words, causal order,
//! pending items, history).

use crate::support::*;
use serde_json::{json, Value};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");

/// The CLI doing what the MCP session did, in the same order.
fn cli_equivalent(db: &TestDb) {
    let s = "user:42";
    let o = db.write_with(
        (s, "package_manager"),
        "pnpm",
        "global",
        "thread:17/message:86",
        &["--raw", "以后新建前端项目，默认用 pnpm。"],
    );
    assert_eq!(o["outcome"], "inserted");
    db.write_with(
        (s, "Formatter"),
        "prettier",
        "global",
        "thread:17/message:90",
        &["--raw", "format with prettier"],
    );
    let o = db.write_ambiguous(
        s,
        "package_manager",
        "npm",
        "global,repo:web-app",
        "thread:31/message:2",
        "以后都用 npm",
    );
    assert_eq!(o["outcome"], "pending");
    db.write_with(
        (s, "package_manager"),
        "npm",
        "repo:legacy-dashboard",
        "thread:23/message:14",
        &["--raw", "这个仓库保持 npm ci，别换。"],
    );
    let o = db.write(
        s,
        "package manager",
        " PNPM ",
        "global",
        "thread:24/message:3",
    );
    assert_eq!(o["outcome"], "confirmed");
    let o = db.write_with(
        (s, "formatter"),
        ValueArg::Json(r#"{"tool":"biome", "version":2}"#),
        "global",
        "thread:27/message:5",
        &["--raw", "switch to biome"],
    );
    assert_eq!(o["outcome"], "superseded");
    db.write_with(
        (s, "coffee"),
        "oat latte",
        "global",
        "thread:40/message:1",
        &["--raw", "我每天喝燕麦拿铁"],
    );
    db.run(&args_for(
        "delete",
        s,
        "coffee",
        &["--yes", "--reason", "user asked"],
    ))
    .ok();
    // `all` tombstoned only the scope that held it: the task, empty then, takes a write.
    let o = db.write(s, "coffee", "豆浆 🥛", "task:早餐🍳", "thread:40/message:2");
    assert_eq!(o["outcome"], "inserted");
    let o = db.write(s, "coffee", "espresso", "global", "thread:41/message:1");
    assert_eq!(o["outcome"], "rejected");
    // Forgotten again: the refused write's source is blanked.
    assert_eq!(db.delete(s, "coffee", "global")["blanked_sources"], 1);
    // Forgetting what only waited in the pending queue tombstones the scopes it offered: the
    // same write again is rejected, ambiguous or placed.
    let o = db.write_ambiguous(
        s,
        "tea",
        "乌龙 🍵",
        "global,repo:web-app",
        "thread:42/message:1",
        "乌龙就好",
    );
    assert_eq!(o["outcome"], "pending");
    db.run(&args_for(
        "delete",
        s,
        "tea",
        &["--yes", "--reason", "forget via MCP"],
    ))
    .ok();
    let o = db.write_ambiguous(
        s,
        "tea",
        "乌龙 🍵",
        "global,repo:web-app",
        "thread:42/message:2",
        "乌龙就好",
    );
    assert_eq!(o["outcome"], "rejected");
    let o = db.write(s, "tea", "乌龙 🍵", "global", "thread:42/message:3");
    assert_eq!(o["outcome"], "rejected");
}

/// A record or event without its wall-clock times.
fn timeless(mut v: Value, drop: &[&str]) -> Value {
    if let Some(m) = v.as_object_mut() {
        for k in drop {
            m.remove(*k);
        }
    }
    v
}

fn comparable(items: Vec<Value>, drop: &[&str]) -> Vec<Value> {
    items.into_iter().map(|v| timeless(v, drop)).collect()
}

#[test]
fn python_sdk_client_writes_exactly_what_the_cli_writes() {
    sdk_client_matches_the_cli(&TestDb::new(), &TestDb::new(), true);
}

/// The same session and the same comparison with both databases on PostgreSQL.
#[test]
fn python_sdk_client_writes_exactly_what_the_cli_writes_on_postgres() {
    let Some((mcp_db, _drop_mcp)) = postgres_test_db() else {
        return;
    };
    let Some((cli_db, _drop_cli)) = postgres_test_db() else {
        return;
    };
    sdk_client_matches_the_cli(&mcp_db, &cli_db, false);
}

/// The Python SDK client's session on `mcp_db`, the CLI's equivalent on `cli_db`, compared;
/// `file` when they are SQLite files (then the forgotten words are looked for on disk too).
fn sdk_client_matches_the_cli(mcp_db: &TestDb, cli_db: &TestDb, file: bool) {
    let (stdout, stderr) = run_python_mcp_client(CLIENT, &mcp_db.path, "the Python MCP client");
    // The server said who and where it serves, once per session, on stderr (not on stdout,
    // which is the protocol) — the session started as `USER:42` too, named as stored.
    assert_eq!(
        lines_starting(&stderr, "memscope mcp: serving user:42").len(),
        6,
        "{stderr}"
    );
    // A PostgreSQL address is named without its password.
    let address = mcp_db.path_str();
    if let Some(password) = address
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(creds, _)| creds.split_once(':'))
        .map(|(_, password)| password)
    {
        assert!(
            !stderr.contains(password),
            "the password was shown: {stderr}"
        );
    }
    let facts: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("the client's last line is not JSON ({e}): {stdout}\nstderr: {stderr}")
    });

    cli_equivalent(cli_db);
    mcp_db.assert_check_ok();
    cli_db.assert_check_ok();

    // The current view: same identities, values, versions, scopes, sources, raw words and
    // causal order; only the times differ.
    let times = ["created_at", "updated_at", "confirmed_at"];
    let mcp_list = comparable(mcp_db.list(&[]), &times);
    let cli_list = comparable(cli_db.list(&[]), &times);
    // package_manager twice, formatter, and coffee in the task that held nothing when
    // `forget all` ran; coffee elsewhere and tea are forgotten.
    assert_eq!(mcp_list.len(), 4, "{mcp_list:#?}");
    assert_eq!(mcp_list, cli_list);
    let pm_global = mcp_list
        .iter()
        .find(|r| r["predicate"] == "package_manager" && r["scope"] == "global")
        .expect("the pnpm default");
    assert_eq!(pm_global["value"], "pnpm");
    assert_eq!(pm_global["confirm_count"], 1);

    // The ambiguity queue: the `unsure` write waits for a human with both candidates.
    let mcp_pending = comparable(mcp_db.pending(true), &["created_at"]);
    let cli_pending = comparable(cli_db.pending(true), &["created_at"]);
    assert_eq!(mcp_pending, cli_pending);
    assert_eq!(mcp_pending.len(), 1);
    assert_eq!(mcp_pending[0]["id"], facts["pending_id"]);
    assert_eq!(
        mcp_pending[0]["candidates"],
        json!(["global", "repo:web-app"])
    );
    assert_eq!(mcp_pending[0]["raw"], "以后都用 npm");

    // History, event by event (the delete's detail carries times; its count is compared).
    for predicate in ["package_manager", "formatter", "coffee", "tea"] {
        let strip = |events: Vec<Value>| -> Vec<Value> {
            events
                .into_iter()
                .map(|mut e| {
                    let purged = e["detail"]["purged_versions"].clone();
                    e = timeless(e, &["at", "id", "detail", "valid_until"]);
                    e["purged_versions"] = purged;
                    e
                })
                .collect()
        };
        let a = strip(mcp_db.history("user:42", predicate, None));
        let b = strip(cli_db.history("user:42", predicate, None));
        assert_eq!(a, b, "history of {predicate}");
    }
    let coffee: Vec<String> = mcp_db
        .history("user:42", "coffee", Some("global"))
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        coffee,
        ["deleted", "rejected"],
        "content purged, rewrite refused"
    );
    let in_task = mcp_db.history("user:42", "coffee", Some("task:早餐🍳"));
    assert_eq!(in_task.len(), 1, "the task's own write: {in_task:?}");
    assert_eq!(in_task[0]["event"], "set");
    // `forget` purged the user's words from every database file, as `memscope delete` does.
    if file {
        assert_eq!(
            find_on_disk(&mcp_db.path, "我每天喝燕麦拿铁"),
            Vec::<String>::new()
        );
    }

    // What the agents were told is what resolve says, and the reads were logged with the agent.
    for (fact, repo) in [
        ("recall_legacy", "legacy-dashboard"),
        ("recall_new", "new-project"),
    ] {
        let timeless_chain = |mut r: Value| {
            r.as_object_mut().unwrap().remove("logged");
            for c in r["considered"].as_array_mut().unwrap() {
                c.as_object_mut().unwrap().remove("updated_at");
            }
            r
        };
        let told = timeless_chain(facts[fact].clone());
        let resolved =
            timeless_chain(cli_db.resolve("user:42", "package_manager", &["--repo", repo]));
        assert_eq!(told, resolved, "{fact}");
    }
    let reads = as_array(mcp_db.json(&["reads", "--json"]));
    let summary: Vec<(String, String, String)> = reads
        .iter()
        .rev()
        .map(|r| {
            (
                r["agent"].as_str().unwrap_or("").to_string(),
                r["repo"].as_str().unwrap_or("").to_string(),
                r["scope"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "claude-code".into(),
                "legacy-dashboard".into(),
                "repo:legacy-dashboard".into()
            ),
            // No --agent: the MCP client's own name (the Python SDK calls itself "mcp").
            ("mcp".into(), "new-project".into(), "global".into()),
            ("mcp".into(), "new-project".into(), "-".into()),
        ]
    );
    assert!(reads.iter().all(|r| r.get("value").is_none()));
}
