//! The tools the MCP server offers — `remember`, `recall`, `list_memories` and (only with
//! `--allow-forget`) `forget` — as plain synchronous functions over the store, so that the
//! protocol layer only moves JSON. Every write goes through [`Store::write`], exactly like the
//! CLI's `memscope write`.

use super::context::McpContext;
use super::turns::{Ticket, Turns};
use crate::model::{
    shorten, value_text, DeleteTarget, Identity, OutcomeKind, OutcomeScope, Resolution, Scope,
    ScopeChoice, WriteContext, WriteOutcome, WriteRequest,
};
use crate::store::{AnyStore, ListFilter};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex, MutexGuard};

pub const REMEMBER: &str = "remember";
pub const RECALL: &str = "recall";
pub const LIST_MEMORIES: &str = "list_memories";
pub const FORGET: &str = "forget";

/// The name a client gives itself (`clientInfo.name`) as the read log keeps it when the server
/// has no `--agent`: the host chose it, unchecked as `--agent` is, so its control characters
/// are kept as escapes (a NUL could not be stored on PostgreSQL, nor moved there from a file)
/// and a name past 100 characters is cut.
fn client_label(name: &str) -> String {
    shorten(&crate::model::escape_controls(name.trim()), 100)
}

/// A tool as listed to the client.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    pub read_only: bool,
    pub destructive: bool,
}

/// What a tool call came to: a sentence for the model, the same facts as JSON, and whether it
/// is a tool error (`isError`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub text: String,
    pub data: Value,
    pub is_error: bool,
}

impl ToolReply {
    fn ok(text: String, data: Value) -> ToolReply {
        ToolReply {
            text: printable(&text),
            data,
            is_error: false,
        }
    }

    fn error(text: impl Into<String>) -> ToolReply {
        let text = printable(&text.into());
        ToolReply {
            data: json!({ "error": text }),
            text,
            is_error: true,
        }
    }
}

/// `ctx` with the subject and places as stored (README, "one spelling per place"): the host
/// may have typed `USER:42` for `User:42`. Resolve finds them (for `predicate`; any will do),
/// as `recall` shows them.
fn spelled(
    ctx: &McpContext,
    store: &mut AnyStore,
    predicate: Option<&str>,
) -> anyhow::Result<McpContext> {
    let found = store.resolve(
        &ctx.subject,
        predicate.unwrap_or("any"),
        ctx.repo.as_deref(),
        ctx.task.as_deref(),
    )?;
    let mut ctx = ctx.clone();
    ctx.subject = found.subject;
    for c in &found.considered {
        match Scope::parse(&c.scope) {
            Ok(Scope::Repo(r)) => ctx.repo = Some(r),
            Ok(Scope::Task(t)) => ctx.task = Some(t),
            _ => {}
        }
    }
    Ok(ctx)
}

/// A tool's text as a host may print it on a terminal: what a model or a person stored
/// (values, sources, ids) is hostile, so every control character, direction control and
/// character that prints as nothing is escaped, line by line (the text's own lines stay).
fn printable(text: &str) -> String {
    text.split('\n')
        .map(crate::model::escape_controls)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tools of one server: its runtime context and its one store.
///
/// The store is opened once and kept for the server's life; concurrent calls (hosts forward
/// a model's parallel tool calls) take turns on it. Between calls it holds no transaction, so
/// an idle server blocks no writer and no checkpoint of another process.
pub struct Tools {
    ctx: McpContext,
    /// `ctx` with the subject and places as stored, for the sentences that name them (the
    /// instructions, the tools' descriptions, a refused scope): found when the server starts
    /// and again by every `list_memories`, so naming them never waits for the store.
    spelled: Mutex<McpContext>,
    store: Mutex<AnyStore>,
    /// Calls take turns in the order they arrived; a call waiting for its turn can see it was
    /// cancelled before it starts (`call`).
    turns: Arc<Turns>,
}

impl Tools {
    pub fn new(ctx: McpContext, mut store: AnyStore) -> Tools {
        let spelled = spelled(&ctx, &mut store, None).unwrap_or_else(|_| ctx.clone());
        // Calls take turns: behind another session's lock, each queued call waited its own
        // whole lock timeout in turn, the third answered after 39 s, past a host's tool timeout
        // (found by an exploratory test). After one call gave up, the next give up at once
        // until the lock is gone (best effort: a connection that cannot set it waits per call).
        let _ = store.wait_for_a_held_lock_once();
        Tools {
            ctx,
            spelled: Mutex::new(spelled),
            store: Mutex::new(store),
            turns: Arc::default(),
        }
    }

    /// A call's place in the queue of calls, taken as it arrives (see `call`).
    pub fn ticket(&self) -> Ticket {
        self.turns.ticket()
    }

    pub fn context(&self) -> &McpContext {
        &self.ctx
    }

    /// The server's context with the subject and places as stored (see `spelled`).
    pub fn described(&self) -> String {
        self.spelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .describe()
    }

    /// The server's instructions to the model (sent with the `initialize` result).
    pub fn instructions(&self) -> String {
        let forget = if self.ctx.allow_forget {
            " `forget` deletes a memory for good when the user asks you to forget it."
        } else {
            " Deleting memories is left to a human (`memscope delete`)."
        };
        format!(
            "memscope is the user's long-term memory, shared with other coding agents. You serve {}. \
             Before relying on a preference or convention (package manager, formatter, test command …), \
             call `recall`: it applies the most specific rule for this context (task > repo > global), \
             not the latest one. When the user states something lasting, call `remember` with their own \
             words and the right scope — `repo` for a rule of this repository, `global` only for a default \
             everywhere, `unsure` when you cannot tell (a human then decides).{forget}",
            self.described()
        )
    }

    /// The tools this server offers; `forget` only when started with `--allow-forget`.
    pub fn definitions(&self) -> Vec<ToolDef> {
        let ctx = &self
            .spelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let repo_note = match &ctx.repo {
            Some(r) => format!("`repo` = repo:{r}, the repository you are working in"),
            None => "`repo` is unavailable: this server was started without a repository".into(),
        };
        let task_note = match &ctx.task {
            Some(t) => format!("`task` = task:{t}, the task you are working on"),
            None => "`task` is unavailable: this server was started without a task".into(),
        };
        let unsure_note = match &ctx.repo {
            Some(r) => format!(
                "`unsure` = you cannot tell whether it is a global default or a rule of repo:{r}: the write is queued for a human to choose, and nothing changes until then"
            ),
            None => "`unsure` is unavailable without a repository".into(),
        };
        let mut defs = vec![
            ToolDef {
                name: REMEMBER,
                title: "Remember a lasting fact or preference",
                description: format!(
                    "Store something the user told you that should hold in later sessions, e.g. \"new front-end \
                     projects use pnpm\" or \"this repo keeps npm ci\". Memories are about {subject}. \
                     Choose the scope carefully: `global` = the user's default everywhere; {repo_note}; \
                     {task_note}; {unsure_note}. A rule stated about one repository belongs in `repo`, not \
                     `global`. The result says what happened: inserted, confirmed (already known), superseded \
                     (replaced an older value), stale (a newer value was already stored), pending (queued for \
                     a human, with its pending id) or rejected (the user deleted this memory: do not retry).",
                    subject = ctx.subject
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "predicate": {
                            "type": "string",
                            "description": "What the memory is about, as a short name, e.g. package_manager, formatter, test_command. Spellings are normalized (Package Manager → package_manager)."
                        },
                        "value": {
                            "description": "The value to remember: usually a string such as \"pnpm\"; any JSON (number, list, object) is allowed. Not null."
                        },
                        "raw": {
                            "type": "string",
                            "description": "The user's own words this memory comes from, quoted exactly (any language). Strongly recommended: a human reviews memories by them."
                        },
                        "source": {
                            "type": "string",
                            "description": "Where you learned it, e.g. the conversation and message id (thread:23/message:14), or another short id if you have none. Not the user's words (they go in raw): a source is provenance, kept in history — also when a deleted memory refuses the write."
                        },
                        "scope": {
                            "type": "string",
                            "enum": ["global", "repo", "task", "unsure"],
                            "description": "global | repo | task | unsure. The repository and task ids come from this server, never from you."
                        }
                    },
                    "required": ["predicate", "value", "source", "scope"],
                    "additionalProperties": false
                }),
                read_only: false,
                destructive: false,
            },
            ToolDef {
                name: RECALL,
                title: "Recall what applies here",
                description: format!(
                    "Look up a memory of {} for the current context. Resolution is by precedence, not \
                     recency: the task's rule, else the repository's, else the global default. Returns \
                     the winning value and every scope considered (which one won, which it shadowed), so \
                     you can say why. Call it before choosing a tool or convention the user may have a \
                     preference about. The read is logged (never the value) for later audits.",
                    ctx.describe()
                ),
                input_schema: predicate_only_schema("What to look up, e.g. package_manager.", true),
                read_only: false,
                destructive: false,
            },
            ToolDef {
                name: LIST_MEMORIES,
                title: "List memories for this context",
                description: format!(
                    "List the current memories of {} that can apply here: global ones, this repository's \
                     and this task's, marking which one applies for each predicate (task > repo > global) \
                     and which are shadowed. Also says how many writes wait for a human.",
                    ctx.describe()
                ),
                input_schema: {
                    let mut schema = predicate_only_schema(
                        "Optional: only this predicate, e.g. package_manager.",
                        false,
                    );
                    schema["properties"]["after"] = json!({
                        "type": "string",
                        "description": "Optional: the next page — the `next_after` a longer list gave."
                    });
                    schema
                },
                read_only: true,
                destructive: false,
            },
        ];
        if ctx.allow_forget {
            defs.push(ToolDef {
                name: FORGET,
                title: "Forget a memory for good",
                description: format!(
                    "Delete a memory of {} when the user asks you to forget it. This cannot be undone: the \
                     values and the user's words of every version are destroyed, a tombstone keeps it \
                     deleted, and later `remember` calls for it are rejected until a human restores it. \
                     `scope`: global, repo ({}), task ({}), or all = this predicate in every scope where \
                     the user has it stored or waiting now, including other repositories (a scope where \
                     nothing is stored gets no tombstone: a later `remember` there is stored as usual).",
                    ctx.subject,
                    ctx.repo
                        .as_ref()
                        .map(|r| format!("repo:{r}"))
                        .unwrap_or_else(|| "unavailable".into()),
                    ctx.task
                        .as_ref()
                        .map(|t| format!("task:{t}"))
                        .unwrap_or_else(|| "unavailable".into()),
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "predicate": {
                            "type": "string",
                            "description": "What to forget, e.g. package_manager."
                        },
                        "scope": {
                            "type": "string",
                            "enum": ["global", "repo", "task", "all"],
                            "description": "global | repo | task | all (every scope of this predicate)."
                        },
                        "reason": {
                            "type": "string",
                            "description": "Why, in a few words, e.g. \"user asked to forget it\" — never the memory's content: the reason is kept with the tombstone after the content is destroyed."
                        }
                    },
                    "required": ["predicate", "scope"],
                    "additionalProperties": false
                }),
                read_only: false,
                destructive: true,
            });
        }
        defs
    }

    /// Runs a tool. `None` for a name this server never offers; a known tool that is switched
    /// off (`forget`) or any failure is an error reply, never a panic.
    pub fn call(
        &self,
        ticket: Ticket,
        name: &str,
        args: Option<Map<String, Value>>,
        client_name: Option<&str>,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<ToolReply> {
        let args = args.unwrap_or_default();
        // Calls take turns in the order they arrived; one the client cancelled while it waited
        // for its turn never starts (README, "Agents": only a write already started may still
        // commit).
        let _turn = ticket.wait();
        if cancelled() {
            return Some(ToolReply::error(
                "the client cancelled this call before it started: nothing was done",
            ));
        }
        self.store.lock().unwrap_or_else(|e| e.into_inner()).turn();
        let reply = match name {
            REMEMBER => self.remember(&args),
            RECALL => self.recall(&args, client_name),
            LIST_MEMORIES => self.list_memories(&args),
            FORGET if !self.ctx.allow_forget => Err(
                "forget is disabled on this server: deleting memories is left to a human. Tell the user to run \
                 `memscope delete`, or to restart `memscope mcp` with --allow-forget if agents may delete."
                    .to_string(),
            ),
            FORGET => self.forget(&args),
            _ => return None,
        };
        Some(reply.unwrap_or_else(ToolReply::error))
    }

    /// Run every few hundred ms while the server waits: when no call holds the store, empties
    /// a SQLite file's write-ahead log that no one wrote to since the last time
    /// (`Store::settle_idle_log`), so a file moved over the path later finds no log of this
    /// database's. A failure is said on stderr, the host's log; the calls go on.
    pub fn idle(&self) {
        let Ok(mut store) = self.store.try_lock() else {
            return;
        };
        if let Err(e) = store.settle_idle_log() {
            crate::frontend::errln!(
                "memscope mcp: cannot empty the database's write-ahead log: {}",
                crate::store::error_text(&e)
            );
        }
    }

    /// The server's store, for one call — refused, reads included, once the SQLite file was
    /// removed or replaced under the server: the path names another database now, and
    /// answering from the old one would tell the agent what the user removed (README,
    /// "Agents"). A call that panicked cannot have left a transaction open (rusqlite and
    /// postgres roll back on unwind), so a poisoned lock is taken as it is.
    fn store(&self) -> Result<MutexGuard<'_, AnyStore>, String> {
        let store = self
            .store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if store.file_moved() {
            return Err(
                "the database file this server opened was removed or replaced since it started, so nothing was read or written: \
                 tell the user to restart the MCP server (or its host) to serve what is at that path now"
                    .to_string(),
            );
        }
        Ok(store)
    }

    fn remember(&self, args: &Map<String, Value>) -> Result<ToolReply, String> {
        let mut a = ArgReader::new(REMEMBER, args);
        let predicate = a.string("predicate")?;
        let value = a.any("value")?;
        let raw = a.opt_string("raw")?;
        let source = a.string("source")?;
        let scope = a.string("scope")?;
        a.finish()?;
        if value.is_null() {
            return Err(
                "remember: `value` is null: give the value to remember, e.g. \"pnpm\" (to delete a memory, ask the user)"
                    .into(),
            );
        }
        // The kind in any case, as in every command (README, "The model in one minute").
        let choice = match scope.trim().to_lowercase().as_str() {
            "global" => ScopeChoice::Exact(Scope::Global),
            "repo" => ScopeChoice::Exact(Scope::Repo(self.need_repo("repo")?)),
            "task" => ScopeChoice::Exact(Scope::Task(self.need_task()?)),
            "unsure" => {
                let repo = self.need_repo("unsure")?;
                ScopeChoice::ambiguous(vec![Scope::Global, Scope::Repo(repo)])?
            }
            _ => {
                return Err(bad_scope(&scope, "global, repo, task or unsure", || {
                    self.described()
                }))
            }
        };
        let req = WriteRequest {
            subject: self.ctx.subject.clone(),
            predicate,
            value,
            scope: choice,
            source,
            raw,
            causal_seq: None,
            // Where the agent works: the scope guard weighs its words against it.
            context: (self.ctx.repo.is_some() || self.ctx.task.is_some()).then(|| WriteContext {
                repo: self.ctx.repo.clone(),
                task: self.ctx.task.clone(),
            }),
        };
        let mut store = self.store()?;
        let out = store
            .write(&req)
            .map_err(|e| failed("remember", "nothing was written", &e))?;
        let text = describe_outcome(&out);
        let data = serde_json::to_value(&out).map_err(|e| e.to_string())?;
        Ok(ToolReply::ok(text, data))
    }

    fn recall(
        &self,
        args: &Map<String, Value>,
        client_name: Option<&str>,
    ) -> Result<ToolReply, String> {
        let mut a = ArgReader::new(RECALL, args);
        let predicate = a.string("predicate")?;
        a.finish()?;
        let client = client_name.map(client_label);
        let agent = self
            .ctx
            .agent
            .as_deref()
            .or(client.as_deref())
            .filter(|n| !n.trim().is_empty())
            .unwrap_or("mcp");
        let mut store = self.store()?;
        let (repo, task) = (self.ctx.repo.as_deref(), self.ctx.task.as_deref());
        let (r, logged) = if store.is_read_only() {
            (
                store.resolve(&self.ctx.subject, &predicate, repo, task),
                false,
            )
        } else {
            (
                store.resolve_logged(&self.ctx.subject, &predicate, repo, task, Some(agent), None),
                true,
            )
        };
        let r = r.map_err(|e| format!("recall failed: {e:#}"))?;
        let mut text = describe_resolution(&r);
        // What waits for a human here (found by an exploratory test: the scope guard queued this
        // repository's rule, and the agent in it was told only "no memory applies" or the
        // global value — until someone decides, the user is the one to ask).
        let waiting = match r.scope.as_deref() {
            None | Some("global") => waiting_here(&mut store, &self.ctx, &r)
                .map_err(|e| format!("recall failed: {e:#}"))?,
            Some(_) => Vec::new(),
        };
        for p in &waiting {
            let candidates: Vec<String> = p.candidates.iter().map(Scope::to_string).collect();
            text.push_str(&format!(
                " A write of {} waits for a human: pending #{} = {} could be {}{}; until someone decides, ask the user which applies here.",
                r.predicate,
                p.id,
                shorten(&value_text(&p.value), 120),
                candidates.join(" or "),
                p.reason.as_deref().map(|why| format!(" ({why})")).unwrap_or_default()
            ));
        }
        if !logged {
            text.push_str(" (The database is read-only, so this read was not logged.)");
        }
        let mut data = serde_json::to_value(&r).map_err(|e| e.to_string())?;
        data["logged"] = json!(logged);
        if !waiting.is_empty() {
            data["pending"] = json!(waiting.iter().map(|p| p.id).collect::<Vec<_>>());
        }
        Ok(ToolReply::ok(text, data))
    }

    fn list_memories(&self, args: &Map<String, Value>) -> Result<ToolReply, String> {
        let mut a = ArgReader::new(LIST_MEMORIES, args);
        let predicate = a.opt_string("predicate")?;
        let after = a.opt_string("after")?;
        a.finish()?;
        let mut store = self.store()?;
        let fail = |e: anyhow::Error| format!("list_memories failed: {e:#}");
        let ctx = spelled(&self.ctx, &mut store, predicate.as_deref()).map_err(fail)?;
        *self.spelled.lock().unwrap_or_else(|e| e.into_inner()) = ctx.clone();
        let chain = ctx.chain();
        let mut records = Vec::new();
        for scope in &chain {
            let filter = ListFilter {
                scope: Some(scope.clone()),
                subject: Some(ctx.subject.clone()),
                predicate: predicate.clone(),
            };
            records.extend(store.list(&filter).map_err(fail)?);
        }
        // Per predicate, highest precedence first; the first one applies here.
        records.sort_by(|x, y| {
            x.predicate
                .cmp(&y.predicate)
                .then(y.scope.rank().cmp(&x.scope.rank()))
        });
        let subject_key = crate::spelling::fold(&ctx.subject);
        let pending = store
            .pending(false)
            .map_err(fail)?
            .into_iter()
            // One subject in any spelling (README, "One spelling per place"): the host may
            // type `user:42` for the stored `User:42`.
            .filter(|p| crate::spelling::fold(&p.subject) == subject_key)
            .count();
        let mut lines = vec![format!(
            "Memories of {} (task > repo > global; → applies here):",
            ctx.describe()
        )];
        // One page: predicates past `after`, whole, until either bound is reached (README,
        // "Agents"): a subject with thousands of memories must not flood the model's context.
        let records: Vec<_> = records
            .into_iter()
            .filter(|r| after.as_deref().is_none_or(|a| r.predicate.as_str() > a))
            .collect();
        let mut items = Vec::new();
        let mut last: Option<&str> = None;
        let (mut shown, mut bytes) = (0usize, 0usize);
        let mut cut = None;
        for (i, r) in records.iter().enumerate() {
            let applies = last != Some(r.predicate.as_str());
            if applies && shown > 0 && (shown >= LIST_PAGE_PREDICATES || bytes >= LIST_PAGE_BYTES) {
                cut = Some(i);
                break;
            }
            last = Some(r.predicate.as_str());
            shown += usize::from(applies);
            lines.push(format!(
                "{} {} = {}  [{} v{}]{}",
                if applies { "→" } else { " " },
                r.predicate,
                shorten(&value_text(&r.value), 120),
                r.scope,
                r.version,
                if applies { "" } else { " (shadowed)" }
            ));
            let item = json!({
                "predicate": r.predicate,
                "scope": r.scope,
                "value": r.value,
                "version": r.version,
                "source": r.source,
                "raw": r.raw,
                "updated_at": r.updated_at,
                "applies": applies,
            });
            bytes += item.to_string().len();
            items.push(item);
        }
        // Sorted by predicate: the rest's predicates are its runs.
        let more = cut.map_or(0, |i| {
            records[i..]
                .chunk_by(|x, y| x.predicate == y.predicate)
                .count()
        });
        let next_after = cut.and(last);
        if let Some(next) = next_after {
            lines.push(format!(
                "… and {more} more predicate(s) not shown: call list_memories with `after`: {} for the next page, or with `predicate` for one.",
                value_text(&Value::String(next.to_string()))
            ));
        }
        if records.is_empty() {
            lines.push(match (&predicate, &after) {
                (Some(p), _) => format!("  none for {p}"),
                (None, Some(a)) => format!("  none after {}", shorten(a, 60)),
                (None, None) => "  none yet".to_string(),
            });
        }
        if pending > 0 {
            lines.push(format!(
                "{pending} write(s) of {} wait for a human in the pending queue.",
                ctx.subject
            ));
        }
        Ok(ToolReply::ok(
            lines.join("\n"),
            json!({
                "subject": ctx.subject,
                "repo": ctx.repo,
                "task": ctx.task,
                "scopes": chain,
                "memories": items,
                "more_predicates": more,
                "next_after": next_after,
                "pending": pending,
            }),
        ))
    }

    fn forget(&self, args: &Map<String, Value>) -> Result<ToolReply, String> {
        let mut a = ArgReader::new(FORGET, args);
        let predicate = a.string("predicate")?;
        let scope = a.string("scope")?;
        let reason = a.opt_string("reason")?;
        a.finish()?;
        let subject = self.ctx.subject.clone();
        let identity = |scope: Scope| {
            DeleteTarget::Identity(Identity {
                subject: subject.clone(),
                predicate: predicate.clone(),
                scope,
            })
        };
        let target = match scope.trim().to_lowercase().as_str() {
            "global" => identity(Scope::Global),
            "repo" => identity(Scope::Repo(self.need_repo("repo")?)),
            "task" => identity(Scope::Task(self.need_task()?)),
            "all" => DeleteTarget::Predicate {
                subject: subject.clone(),
                predicate: predicate.clone(),
            },
            _ => {
                return Err(bad_scope(&scope, "global, repo, task or all", || {
                    self.described()
                }))
            }
        };
        let reason = reason.unwrap_or_else(|| "forget via MCP".to_string());
        let mut store = self.store()?;
        let report = store
            .delete(&target, Some(&reason))
            .map_err(|e| failed("forget", "nothing was deleted", &e))?;
        let named = |refs: &[crate::model::TombstoneRef]| {
            refs.iter()
                .map(|t| format!("{} at {} (tombstone v{})", t.predicate, t.scope, t.version))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if report.changed_nothing() {
            let text = format!(
                "already forgotten, nothing was left to purge: {}. Later writes to it are rejected until a human restores it.",
                named(&report.already_deleted)
            );
            let data = serde_json::to_value(&report).map_err(|e| e.to_string())?;
            return Ok(ToolReply::ok(text, data));
        }
        // Only pending items or notes were left, each of a place already deleted (an item
        // offering a place makes its delete tombstone it): what blocks later writes is said as
        // it is.
        let mut text = if report.tombstoned.is_empty()
            && report.purged_pending + report.purged_notes == 0
        {
            // Only what was blanked was left of it (the blanked sentence follows).
            format!(
                "already forgotten: {}. Later writes to it are rejected until a human restores it.",
                named(&report.already_deleted)
            )
        } else if report.tombstoned.is_empty() {
            format!(
                "no stored memory of {predicate} to forget; dropped {} pending item(s) and {} read-log note(s) about it. {}",
                report.purged_pending,
                report.purged_notes,
                if report.already_deleted.is_empty() {
                    "Nothing blocks later writes: a new remember is stored as usual.".to_string()
                } else {
                    format!(
                        "Already forgotten: {}; later writes to it are rejected until a human restores it.",
                        named(&report.already_deleted)
                    )
                }
            )
        } else {
            format!(
                "forgotten: {}. Purged {} version(s), {} pending item(s) and {} read-log note(s); later writes to {} are rejected until a human restores it.{}",
                named(&report.tombstoned),
                report.purged_versions,
                report.purged_pending,
                report.purged_notes,
                if report.tombstoned.len() == 1 { "it" } else { "these" },
                // `all` tombstones the scopes that held something, not every scope there is.
                if matches!(target, DeleteTarget::Predicate { .. }) {
                    " A scope not named here held nothing, so a later remember there is stored as usual."
                } else {
                    ""
                }
            )
        };
        if let Some(blanked) = report.blanked_sentence() {
            text.push_str(&format!(" Also {blanked}."));
        }
        if report.guards_missing {
            text.push_str(&format!(
                " Tell the user: {}.",
                crate::model::GUARDS_MISSING_AFTER_DELETE
            ));
        }
        if let Some(note) = &report.disk_note {
            text.push_str(&format!(" Note: {note}."));
        } else if !report.disk_purged {
            text.push_str(
                " Another process holds the database open, so the on-disk purge is pending; memscope completes it at the next write.",
            );
        }
        let data = serde_json::to_value(&report).map_err(|e| e.to_string())?;
        Ok(ToolReply::ok(text, data))
    }

    fn need_repo(&self, what: &str) -> Result<String, String> {
        self.ctx.repo.clone().ok_or_else(|| {
            format!(
                "scope `{what}` needs the repository you are working in, but this server was started without one \
                 (memscope mcp --repo ID or --repo auto): use scope `global` only if it really is the user's default everywhere"
            )
        })
    }

    fn need_task(&self) -> Result<String, String> {
        self.ctx.task.clone().ok_or_else(|| {
            "scope `task` needs the task you are working on, but this server was started without one \
             (memscope mcp --task ID): use `repo` or `global`"
                .to_string()
        })
    }
}

/// The input schema of a tool whose one argument is `predicate` (`required` or optional).
/// A `list_memories` page holds whole predicates, at most this many…
const LIST_PAGE_PREDICATES: usize = 100;
/// …and stops adding them once its memories take this many bytes of JSON.
const LIST_PAGE_BYTES: usize = 256 * 1024;

fn predicate_only_schema(description: &str, required: bool) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "predicate": {"type": "string", "description": description}
        },
        "additionalProperties": false
    });
    if required {
        schema["required"] = json!(["predicate"]);
    }
    schema
}

fn bad_scope(got: &str, allowed: &str, described: impl FnOnce() -> String) -> String {
    let mut s = format!(
        "`scope` must be one of {allowed}, got {}",
        shorten(&value_text(&Value::String(got.to_string())), 60)
    );
    if got.contains(':') {
        s.push_str(&format!(
            ": repository and task ids come from this server ({}), so give only the kind",
            described()
        ));
    }
    s
}

/// One sentence for the model about a write's outcome.
pub fn describe_outcome(o: &WriteOutcome) -> String {
    let predicate = o.predicate.as_deref().unwrap_or("?");
    let scope = match &o.scope {
        Some(OutcomeScope::Exact(s)) => s.to_string(),
        Some(OutcomeScope::Ambiguous { ambiguous }) => ambiguous
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(" or "),
        None => "?".into(),
    };
    let value = o
        .value
        .as_ref()
        .map(|v| shorten(&value_text(v), 120))
        .unwrap_or_default();
    let version = o.version.unwrap_or_default();
    let said = match o.outcome {
        OutcomeKind::Inserted => format!(
            "inserted: {predicate} = {value} at {scope} (version {version}); agents now read it wherever {scope} applies."
        ),
        OutcomeKind::Confirmed => format!(
            "confirmed: {scope} already holds {predicate} = {value} (version {version}); the confirmation and source were recorded, nothing else changed."
        ),
        OutcomeKind::Superseded => format!(
            "superseded: {predicate} at {scope} is now {value} (version {version}), replacing {}; the old value stays in history.",
            o.previous.as_ref().map(|p| shorten(&value_text(p), 120)).unwrap_or_default()
        ),
        OutcomeKind::Stale => format!(
            "stale, not applied: {predicate} at {scope} already has a newer value ({}).",
            o.reason.as_deref().unwrap_or("a causally newer write")
        ),
        OutcomeKind::Pending => format!(
            "pending for a human (pending #{}): {predicate} = {value} could be {scope}, so it was queued and the current view did not change. \
             A person decides with `memscope pending resolve {} --scope SCOPE`; do not write it again.",
            o.pending_id.unwrap_or_default(),
            o.pending_id.unwrap_or_default()
        ),
        OutcomeKind::Rejected => format!(
            "rejected: the user deleted {predicate} at {scope}, so it stays forgotten ({}). Do not store it again unless the user asks a human to restore it.",
            o.reason.as_deref().unwrap_or("tombstoned")
        ),
        OutcomeKind::Removed | OutcomeKind::Error => o.human(),
    };
    match &o.suspect {
        Some(evidence) => format!(
            "{said} The scope guard marked it suspect ({}): if it is a rule of one repository or task only, tell the user — `memscope suspects` shows the rescope that moves it there.",
            evidence.join("; ")
        ),
        None => said,
    }
}

/// The open pending items of a recall's subject and predicate (as stored: the resolution names
/// them so, as the write path stored the items) that could apply where the server serves: a
/// candidate is its repository or task, or `global` when nothing more specific answered.
/// Places compare as places do (`spelling::fold`).
fn waiting_here(
    store: &mut AnyStore,
    ctx: &McpContext,
    r: &Resolution,
) -> anyhow::Result<Vec<crate::model::PendingItem>> {
    use crate::spelling::fold;
    let mut here: Vec<String> = Vec::new();
    here.extend(ctx.repo.as_ref().map(|id| fold(&format!("repo:{id}"))));
    here.extend(ctx.task.as_ref().map(|id| fold(&format!("task:{id}"))));
    if r.scope.is_none() {
        here.push("global".into());
    }
    Ok(store
        .open_pending_of(&r.subject, &r.predicate)?
        .into_iter()
        .filter(|p| {
            p.candidates
                .iter()
                .any(|c| here.contains(&fold(&c.to_string())))
        })
        .collect())
}

/// One paragraph for the model about a resolution: the winner and the chain.
pub fn describe_resolution(r: &Resolution) -> String {
    let chain = r
        .considered
        .iter()
        .map(|c| {
            let value = c
                .value
                .as_ref()
                .map(|v| format!(" {}", shorten(&value_text(v), 80)))
                .unwrap_or_default();
            format!("{}: {}{value}", c.scope, c.state)
        })
        .collect::<Vec<_>>()
        .join("; ");
    match (&r.value, &r.scope) {
        (Some(v), Some(s)) => format!(
            "{} = {} (from {s} v{}, source {}). Considered, most specific first — {chain}.",
            r.predicate,
            shorten(&value_text(v), 200),
            r.version.unwrap_or_default(),
            crate::model::escape_controls(r.source.as_deref().unwrap_or("?"))
        ),
        (None, Some(s)) => format!(
            "{}: {s} applied, but its content has since been destroyed. Considered — {chain}.",
            r.predicate
        ),
        _ => format!(
            "No memory of {} applies here. Considered — {chain}. If it matters, ask the user.",
            r.predicate
        ),
    }
}

/// Reads tool arguments one by one, with errors that name the argument and what was wrong.
struct ArgReader<'a> {
    tool: &'static str,
    args: &'a Map<String, Value>,
    seen: Vec<&'static str>,
}

impl<'a> ArgReader<'a> {
    fn new(tool: &'static str, args: &'a Map<String, Value>) -> ArgReader<'a> {
        ArgReader {
            tool,
            args,
            seen: Vec::new(),
        }
    }

    fn any(&mut self, name: &'static str) -> Result<Value, String> {
        self.seen.push(name);
        self.args
            .get(name)
            .cloned()
            .ok_or_else(|| format!("{}: missing required argument `{name}`", self.tool))
    }

    fn string(&mut self, name: &'static str) -> Result<String, String> {
        match self.any(name)? {
            Value::String(s) if !s.trim().is_empty() => Ok(s),
            Value::String(_) => Err(format!("{}: `{name}` is empty", self.tool)),
            Value::Null => Err(format!(
                "{}: `{name}` must be a string, got null",
                self.tool
            )),
            other => Err(format!(
                "{}: `{name}` must be a string, got {} {}",
                self.tool,
                type_name(&other),
                shorten(&other.to_string(), 60)
            )),
        }
    }

    /// An optional text: absent, null and empty (or blank) all mean "not given".
    fn opt_string(&mut self, name: &'static str) -> Result<Option<String>, String> {
        let blank = matches!(self.args.get(name), Some(Value::String(s)) if s.trim().is_empty());
        if blank || matches!(self.args.get(name), None | Some(Value::Null)) {
            self.seen.push(name);
            return Ok(None);
        }
        self.string(name).map(Some)
    }

    /// Refuses arguments the tool does not take — saying so when they are runtime ids.
    fn finish(self) -> Result<(), String> {
        let extra: Vec<&String> = self
            .args
            .keys()
            .filter(|k| !self.seen.contains(&k.as_str()))
            .collect();
        if let Some(k) = extra.first() {
            let hint = match k.as_str() {
                "subject" | "repo" | "repo_id" | "task" | "task_id" | "agent" => {
                    " (the subject, repository and task come from this server, not from the call)"
                }
                _ => "",
            };
            return Err(format!(
                "{}: unknown argument `{}`{hint}; it takes {}",
                self.tool,
                shorten(k, 40),
                self.seen
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(())
    }
}

/// "a string", "a list" …: what a JSON value is, for error sentences.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        // A model reads "list" where JSON says "array".
        Value::Array(_) => "a list",
        v => crate::model::json_kind(v),
    }
}

/// A failed call's answer: "nothing was written" only where that is known — a lost
/// connection's commit may have landed, and its sentence says so.
fn failed(tool: &str, nothing: &str, e: &anyhow::Error) -> String {
    if crate::store::commit_unknown(e) {
        format!("{tool} failed: {e:#}")
    } else {
        format!("{tool} failed, {nothing}: {e:#}")
    }
}
