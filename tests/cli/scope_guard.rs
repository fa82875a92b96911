//! Issue 16, the scope guard at write time: a global write whose words or message point at the
//! place it was made in is queued for a human between global and that place, with the evidence;
//! a default stated as a default, a write without a context, or the guard turned off is applied.

use crate::support::mcp_session::{tool_text, RawSession};
use crate::support::*;
use serde_json::{json, Value};

const U: &str = "user:42";
const PM: &str = "package_manager";
/// Said in repository legacy-dashboard.
const IN_LEGACY: &[&str] = &["--in-repo", "legacy-dashboard"];
const INCIDENT: &str = "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。";

/// The write waits for a human, and says why: `reason`.
#[track_caller]
fn assert_queued(out: &Value, reason: &str) {
    assert_eq!(out["outcome"], "pending", "{out}");
    let said = out["reason"].as_str().unwrap_or_default();
    assert!(said.contains(reason), "{said}");
}

fn global_write(
    db: &TestDb,
    value: &str,
    source: &str,
    raw: &str,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec!["--raw", raw];
    args.extend_from_slice(extra);
    db.write_with((U, PM), value, "global", source, &args)
}

/// The first article's default (pnpm for every new project), stated as a default, without a
/// context.
fn write_the_default(db: &TestDb) {
    global_write(db, "pnpm", "thread:17", FIRST_RAW, &[]);
}

/// The incident's message writes its sibling (`install_command` in the legacy repo), then says
/// `said` in the legacy repo to write `npm` as global: the global write's outcome.
fn npm_after_its_sibling(db: &TestDb, said: &str) -> Value {
    db.write(
        U,
        "install_command",
        "npm ci",
        "repo:legacy-dashboard",
        "thread:23/message:14",
    );
    global_write(db, "npm", "thread:23/message:14", said, IN_LEGACY)
}

#[test]
fn the_incident_is_queued_with_its_evidence_and_the_default_is_not() {
    incident_queued(TestDb::new());
}

#[test]
fn the_incident_is_queued_with_its_evidence_and_the_default_is_not_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        incident_queued(db);
    }
}

fn incident_queued(db: TestDb) {
    let default = global_write(
        &db,
        "pnpm",
        "thread:17/message:86",
        FIRST_RAW,
        &["--in-repo", "web-app"],
    );
    assert_eq!(
        default["outcome"], "inserted",
        "a default stated as a default: {default}"
    );
    let out = global_write(&db, "npm", "thread:23/message:14", INCIDENT, IN_LEGACY);
    assert_eq!(out["outcome"], "pending", "{out}");
    assert_eq!(
        out["scope"],
        json!({"ambiguous": ["global", "repo:legacy-dashboard"]})
    );
    let reason = out["reason"].as_str().unwrap();
    assert!(
        reason.contains("the words say “这个仓库”") && reason.contains("do not write it again"),
        "{reason}"
    );
    // pnpm is still what every new project gets.
    assert_eq!(db.resolve(U, PM, &["--repo", "web-app"])["value"], "pnpm");
    let item = &db.pending(false)[0];
    assert_eq!(item["reason"], "the words say “这个仓库”");
    assert!(db
        .run(&["pending"])
        .ok()
        .stdout
        .contains("why: the words say “这个仓库”"));
    // The human puts it where it belongs.
    let id = item["id"].to_string();
    let put = db.resolve_pending(&id, "repo:legacy-dashboard").ok().json();
    assert_eq!(put["outcome"], "inserted");
    assert_eq!(
        db.resolve(U, PM, &["--repo", "legacy-dashboard"])["value"],
        "npm"
    );
    assert_eq!(db.resolve(U, PM, &["--repo", "web-app"])["value"], "pnpm");
    db.assert_check_ok();
}

/// A tombstone comes before the guard: the incident's words written again after the user
/// deleted the global memory are `rejected`, not queued — a queued item would store the deleted
/// value and words again, and a human resolving it would bring them back.
#[test]
fn a_deleted_memory_is_rejected_before_the_guard_would_queue_it() {
    deleted_before_the_guard(TestDb::new());
}

#[test]
fn a_deleted_memory_is_rejected_before_the_guard_would_queue_it_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        deleted_before_the_guard(db);
    }
}

fn deleted_before_the_guard(db: TestDb) {
    global_write(&db, "npm", "thread:23/message:14", INCIDENT, &[]);
    db.run(&args_for("delete", U, PM, &["--scope", "global"]))
        .ok();
    let out = global_write(&db, "npm", "thread:23/message:15", INCIDENT, IN_LEGACY);
    assert_eq!(out["outcome"], "rejected", "{out}");
    assert!(db.pending(true).is_empty(), "nothing queued");
    assert_eq!(
        db.sql_i64(&format!(
            "SELECT count(*) FROM history WHERE raw = '{INCIDENT}' OR value LIKE '%npm%'"
        )),
        0,
        "the deleted words are stored nowhere again"
    );
    // A write the guard would queue into a place that is not deleted still is queued.
    let other = global_write(&db, "yarn", "thread:24/message:1", INCIDENT, IN_LEGACY);
    assert_eq!(
        other["outcome"], "rejected",
        "the global identity is still deleted: {other}"
    );
    let other = db.write_with(
        (U, "formatter"),
        "biome",
        "global",
        "thread:24/message:2",
        &["--raw", "这个仓库用 biome", "--in-repo", "legacy-dashboard"],
    );
    assert_eq!(other["outcome"], "pending", "{other}");
    db.assert_check_ok();
}

#[test]
fn a_sibling_or_a_named_repository_is_evidence_too() {
    let db = TestDb::new();
    let out = npm_after_its_sibling(&db, "安装依赖继续用 npm ci。");
    assert_queued(
        &out,
        "the same message wrote install_command in repo:legacy-dashboard",
    );
    let named = global_write(
        &db,
        "yarn",
        "thread:30",
        "storefront uses yarn",
        &["--in-repo", "storefront"],
    );
    assert_queued(&named, "the words name repo:storefront");
}

#[test]
fn without_a_context_or_with_the_guard_off_the_write_is_applied() {
    let db = TestDb::new();
    let out = global_write(&db, "npm", "thread:23", INCIDENT, &[]);
    assert_eq!(
        out["outcome"], "inserted",
        "no context to queue with: applied (and a suspect): {out}"
    );
    assert_eq!(as_array(db.json(&["suspects", "--json"])).len(), 1);
    let db = TestDb::new();
    db.init();
    db.run(&["settings", "set", "scope_guard", "off"]).ok();
    let out = global_write(&db, "npm", "thread:23", INCIDENT, IN_LEGACY);
    assert_eq!(out["outcome"], "inserted", "{out}");
    db.run(&["settings", "set", "scope_guard", "sometimes"])
        .fails_with(2, &["scope_guard must be queue, flag or off"]);
    db.run(&["settings", "set", "scope_guard", "flag"]).ok();
    let out = global_write(&db, "yarn", "thread:24", INCIDENT, IN_LEGACY);
    assert_eq!(out["outcome"], "superseded", "flag applies: {out}");
    assert_eq!(db.json(&["check", "--json"])["metrics"]["suspects"], 1);
}

#[test]
fn apply_lines_carry_their_context() {
    apply_context(TestDb::new());
}

#[test]
fn apply_lines_carry_their_context_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        apply_context(db);
    }
}

fn apply_context(db: TestDb) {
    let line = json!({"subject": U, "predicate": PM, "value": "npm", "scope": "global",
        "source": "thread:23/message:14", "raw": INCIDENT, "context": {"repo": "legacy-dashboard"}});
    let out = db
        .run_stdin(&["apply"], format!("{line}\n").as_bytes())
        .ok()
        .json_lines();
    assert_eq!(out[0]["outcome"], "pending", "{out:?}");
    let bad = json!({"subject": U, "predicate": PM, "value": "npm", "scope": "global",
        "source": "t", "context": {"repo": "task:x"}});
    let out = db
        .run_stdin(&["apply"], format!("{bad}\n").as_bytes())
        .json_lines();
    assert_eq!(out[0]["outcome"], "error", "{out:?}");
}

/// The context names a place as the agent typed it; the queued item names it as stored (the
/// first spelling), so it resolves into the place exactly as listed, a retry in another case
/// joins the same item, and the place is registered as an explicit ambiguous write's is — the
/// same live as after an export and import.
#[test]
fn a_queued_write_names_its_places_as_stored() {
    queued_places_as_stored(TestDb::new());
}

#[test]
fn a_queued_write_names_its_places_as_stored_on_postgres() {
    on_postgres(queued_places_as_stored);
}

fn queued_places_as_stored(db: TestDb) {
    db.write(U, "test_runner", "jest", "repo:web-app", "m:1");
    let said = "这个仓库用 npm 🚀";
    let out = global_write(&db, "npm", "m:2", said, &["--in-repo", "Web-App"]);
    assert_queued(&out, "这个仓库");
    assert_eq!(
        out["scope"],
        json!({"ambiguous": ["global", "repo:web-app"]})
    );
    // A new place: registered with the queued item, in the spelling first typed.
    let first = global_write(&db, "yarn", "m:3", said, &["--in-repo", "新仓库-App"]);
    let again = global_write(&db, "yarn", "m:3", said, &["--in-repo", "新仓库-APP"]);
    assert_eq!(first["pending_id"], again["pending_id"], "{again:#}");
    assert_eq!(
        again["scope"],
        json!({"ambiguous": ["global", "repo:新仓库-App"]})
    );
    let id = out["pending_id"].as_i64().unwrap().to_string();
    let r = db.json(&[
        "pending",
        "resolve",
        &id,
        "--scope",
        "repo:web-app",
        "--json",
    ]);
    assert_eq!(
        (&r["outcome"], &r["scope"]),
        (&json!("inserted"), &json!("repo:web-app")),
        "{r:#}"
    );
    db.assert_check_ok();
    // The dump holds the places as they are live: the imported copy lists the same.
    let dump = db.sibling("queued.jsonl");
    db.run(&["export", "--out", dump.to_str().unwrap()]).ok();
    let moved = TestDb::named("moved.db");
    moved.run(&["import", dump.to_str().unwrap()]).ok();
    assert_eq!(moved.pending(true), db.pending(true));
    assert_eq!(
        moved.run(&["suspects"]).ok().stdout,
        db.run(&["suspects"]).ok().stdout
    );
}

#[test]
fn an_agent_in_the_repository_is_told_its_write_waits_for_a_human() {
    agent_told_it_waits(TestDb::new());
}

#[test]
fn an_agent_in_the_repository_is_told_its_write_waits_for_a_human_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        agent_told_it_waits(db);
    }
}

fn agent_told_it_waits(db: TestDb) {
    write_the_default(&db);
    let mut s = RawSession::serve(
        db.path_str(),
        &["--subject", U, "--repo", "legacy-dashboard"],
    );
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": PM, "value": "npm", "scope": "global", "source": "thread:23/message:14",
            "raw": INCIDENT}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["outcome"], "pending",
        "{r}"
    );
    let text = tool_text(&r);
    assert!(
        text.contains("do not write it again") || text.contains("human"),
        "{text}"
    );
    // The agent in that repository, reading it, is told the global value and that a write for
    // here waits for a human (found by an exploratory test: it was told only the global value).
    let id = r["result"]["structuredContent"]["pending_id"].clone();
    let read = s.request(
        3,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": PM}}),
    );
    let text = tool_text(&read);
    assert!(
        text.contains(&format!(
            "waits for a human: pending #{id} = \"npm\" could be global or repo:legacy-dashboard"
        )) && text.contains("the words say “这个仓库”")
            && text.contains("ask the user which applies here"),
        "{text}"
    );
    assert_eq!(
        read["result"]["structuredContent"]["pending"],
        json!([id]),
        "{read}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    assert_eq!(db.resolve(U, PM, &["--repo", "web-app"])["value"], "pnpm");
    // Elsewhere (another repository) the item is not this place's: nothing is said of it.
    let mut s = RawSession::serve(db.path_str(), &["--subject", U, "--repo", "web-app"]);
    let read = s.request(
        2,
        "tools/call",
        json!({"name": "recall", "arguments": {"predicate": PM}}),
    );
    assert!(!tool_text(&read).contains("waits for a human"), "{read}");
    s.finish();
}

#[test]
fn an_applied_suspect_keeps_its_evidence_in_its_history_event() {
    let evidence = |db: &TestDb| -> Vec<serde_json::Value> {
        db.history(U, PM, Some("global"))
            .into_iter()
            .filter(|e| e["event"] == "set")
            .map(|e| e["detail"]["suspect"].clone())
            .collect()
    };
    // No context: stored, and its `set` event says why it looks like one place's rule.
    let db = TestDb::new();
    let out = global_write(&db, "npm", "thread:23", INCIDENT, &[]);
    assert_eq!(out["outcome"], "inserted", "{out}");
    assert_eq!(evidence(&db), [json!(["the words say “这个仓库”"])]);
    // A default stated as a default is not marked.
    write_the_default(&db);
    assert_eq!(evidence(&db)[1], serde_json::Value::Null);
    // `flag` with a context: stored (not queued), the sibling among its evidence.
    let db = TestDb::new();
    db.init();
    db.run(&["settings", "set", "scope_guard", "flag"]).ok();
    let out = npm_after_its_sibling(&db, INCIDENT);
    assert_eq!(out["outcome"], "inserted", "{out}");
    let marked = evidence(&db).remove(0);
    let said: Vec<&str> = marked
        .as_array()
        .expect("evidence")
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(said.contains(&"the words say “这个仓库”"), "{said:?}");
    assert!(
        said.iter()
            .any(|e| e.contains("the same message wrote install_command in repo:legacy-dashboard")),
        "{said:?}"
    );
    // `off`: nothing is judged, nothing marked; the write path's outcomes are the same.
    let db = TestDb::new();
    db.init();
    db.run(&["settings", "set", "scope_guard", "off"]).ok();
    global_write(&db, "npm", "thread:23", INCIDENT, &[]);
    assert_eq!(evidence(&db), [serde_json::Value::Null]);
    db.assert_check_ok();
}

#[test]
fn at_write_time_a_sibling_counts_in_the_place_the_write_was_made_in() {
    let db = TestDb::new();
    db.write(
        U,
        "install_command",
        "npm ci",
        "repo:legacy-dashboard",
        "thread:23/message:14",
    );
    // The same message, but the agent says it works in another repository: the write-time
    // lookup reads the subject's records there only, so nothing queues it…
    let out = global_write(
        &db,
        "npm",
        "thread:23/message:14",
        "安装依赖继续用 npm ci。",
        &["--in-repo", "storefront"],
    );
    assert_eq!(out["outcome"], "inserted", "{out}");
    // …and the suspects scan, which reads every place, still names the sibling.
    let found = as_array(db.json(&["suspects", "--json"]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0]["evidence"]
        .to_string()
        .contains("the same message wrote install_command in repo:legacy-dashboard"));
}

/// A known place of each kind is found in a global write's words, as stored, on both backends:
/// an id made of tokens (found among the words' tokens: the primary key's lookup on
/// PostgreSQL), in another case too; one with characters no token holds (Chinese: found where it
/// stands in the words, PostgreSQL's `spellings_other_places`); and not an id inside a longer
/// one. PostgreSQL looks the places up by the words since schema 11 instead of reading them all.
/// Chinese ids of two characters bare, inside unspaced Chinese too, and any id written as a
/// scope (`repo:ab`) — but not a short ASCII id bare, and not an id only inside a longer known
/// one (review finding 4).
#[test]
fn known_places_of_every_kind_are_named_in_the_words() {
    known_places_named(TestDb::new());
}

#[test]
fn known_places_of_every_kind_are_named_in_the_words_on_postgres() {
    on_postgres(known_places_named);
}

fn known_places_named(db: TestDb) {
    for (n, place) in [
        "repo:storefront",
        "task:TICKET-42",
        "repo:前端仓库",
        "task:修复-lockfile",
        "repo:web-app-v2",
        "repo:文档",
        "repo:鹊桥",
        "repo:后端服务",
        "repo:ab",
        "task:修复依赖",
        "repo:前端",
        "repo:前端框架",
    ]
    .iter()
    .enumerate()
    {
        db.write(U, "test_runner", "jest", place, &format!("m:{n}"));
    }
    let elsewhere = &["--in-repo", "elsewhere"];
    for (predicate, said, named) in [
        ("a", "storefront uses yarn", "repo:storefront"),
        ("b", "STOREFRONT uses yarn", "repo:storefront"),
        ("c", "for ticket-42 keep npm ci", "task:TICKET-42"),
        ("d", "前端仓库 用 yarn", "repo:前端仓库"),
        ("e", "（修复-lockfile）用 pnpm", "task:修复-lockfile"),
        ("g", "鹊桥 uses yarn", "repo:鹊桥"),
        ("h", "repo:文档 uses yarn", "repo:文档"),
        ("i", "后端服务用 yarn", "repo:后端服务"),
        ("j", "repo:ab uses yarn", "repo:ab"),
        ("k", "REPO：AB uses yarn", "repo:ab"),
        ("l", "修复依赖时别升级 node", "task:修复依赖"),
    ] {
        let out = db.write_with((U, predicate), "yarn", "global", "m:said", &{
            let mut args = vec!["--raw", said];
            args.extend_from_slice(elsewhere);
            args
        });
        assert_queued(&out, &format!("the words name {named}"));
    }
    // `web-app` is no place here; `web-app-v2` is, and is not named by it.
    let out = db.write_with(
        (U, "f"),
        "yarn",
        "global",
        "m:plain",
        &["--raw", "web-app keeps its tabs", "--in-repo", "elsewhere"],
    );
    assert_eq!(out["outcome"], "inserted", "{out}");
    // A short ASCII id bare is a word of every sentence.
    let out = db.write_with(
        (U, "m"),
        "yarn",
        "global",
        "m:ab",
        &["--raw", "ab uses yarn", "--in-repo", "elsewhere"],
    );
    assert_eq!(out["outcome"], "inserted", "{out}");
    // An everyday word (`前端`, `文档`) bare names no place, as `docs` does not.
    for (predicate, said) in [
        ("p", "前端用 pnpm"),
        ("q", "以后新建前端项目，默认用 pnpm。"),
        ("r", "文档写中文，代码注释写英文"),
    ] {
        let out = db.write_with((U, predicate), "pnpm", "global", "m:plain-zh", &{
            let mut args = vec!["--raw", said];
            args.extend_from_slice(elsewhere);
            args
        });
        assert_eq!(out["outcome"], "inserted", "{said}: {out}");
    }
    // `前端` inside `前端框架` is not named; marked as a place on its own, it is.
    for (predicate, said, named) in [
        ("n", "前端框架用 pnpm", &["repo:前端框架"][..]),
        ("o", "在前端里用 pnpm", &["repo:前端"]),
    ] {
        let out = db.write_with((U, predicate), "pnpm", "global", "m:fe", &{
            let mut args = vec!["--raw", said];
            args.extend_from_slice(elsewhere);
            args
        });
        assert_eq!(out["outcome"], "pending", "{out}");
        let mut want = vec!["global", "repo:elsewhere"];
        want.extend_from_slice(named);
        assert_eq!(out["scope"]["ambiguous"], json!(want), "{said}");
    }
    db.assert_check_ok();
}

/// A write the guard stored but marked suspect says so when it is stored — in `write`'s line
/// and JSON, in `apply`'s — with its evidence and where the fix is; a default stated as a
/// default, a confirmation and a queued write say nothing of it (found by an exploratory test:
/// the write said only `superseded`, and nobody learned of the mark until they looked).
#[test]
fn a_write_marked_suspect_is_told_so_when_it_is_stored() {
    told_suspect(TestDb::new());
}

#[test]
fn a_write_marked_suspect_is_told_so_when_it_is_stored_on_postgres() {
    if let Some((db, _drop)) = postgres_test_db() {
        told_suspect(db);
    }
}

fn told_suspect(db: TestDb) {
    write_the_default(&db);
    let default = db.history(U, PM, Some("global"));
    assert_eq!(default.len(), 1);
    let out = global_write(&db, "npm 📦", "thread:23", INCIDENT, &[]);
    assert_eq!(out["outcome"], "superseded", "{out}");
    assert_eq!(out["suspect"], json!(["the words say “这个仓库”"]), "{out}");
    // The same words again confirm it: nothing new is stored, nothing said.
    let again = global_write(&db, "npm 📦", "thread:24", INCIDENT, &[]);
    assert_eq!(again["outcome"], "confirmed", "{again}");
    assert!(again.get("suspect").is_none(), "{again}");
    // The text line.
    let text = db
        .run(&[
            "write",
            "--subject",
            U,
            "--predicate",
            "install_command",
            "--value",
            "npm ci",
            "--scope",
            "global",
            "--source",
            "thread:25",
            "--raw",
            INCIDENT,
        ])
        .ok();
    assert!(
        text.stdout.contains("inserted ")
            && text
                .stdout
                .contains("marked suspect: the words say “这个仓库”")
            && text
                .stdout
                .contains("`memscope suspects` shows the rescope"),
        "{text:?}"
    );
    // `apply`'s line.
    let line = json!({"subject": U, "predicate": "test_runner", "value": "jest", "scope": "global",
        "source": "thread:26", "raw": INCIDENT});
    let applied = db
        .run_stdin(&["apply", "-"], format!("{line}\n").as_bytes())
        .ok();
    let told: Value = serde_json::from_str(applied.stdout.trim()).unwrap();
    assert_eq!(
        told["suspect"],
        json!(["the words say “这个仓库”"]),
        "{told}"
    );
    // MCP's `remember`, from a host that gave no repository: the model is told, and what to do.
    let mut s = RawSession::serve(db.path_str(), &["--subject", U]);
    let r = s.request(
        2,
        "tools/call",
        json!({"name": "remember", "arguments": {
            "predicate": "formatter", "value": "prettier", "scope": "global",
            "source": "thread:27", "raw": INCIDENT}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["suspect"],
        json!(["the words say “这个仓库”"]),
        "{r}"
    );
    let text = tool_text(&r);
    assert!(
        text.starts_with("inserted: ")
            && text.contains("The scope guard marked it suspect (the words say “这个仓库”)")
            && text.contains("tell the user"),
        "{text}"
    );
    let (code, _) = s.finish();
    assert_eq!(code, 0);
    assert_eq!(as_array(db.json(&["suspects", "--json"])).len(), 4);
}
