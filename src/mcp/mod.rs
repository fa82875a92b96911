//! `memscope mcp`: the memory store served over the Model Context Protocol on stdio, so that
//! coding agents (Claude Code, Cursor, Codex, Goose …) write into and read from the same
//! database the inspector shows — through the same write path as the CLI.
//!
//! The runtime context (subject, repository, task, agent) comes from the host that starts the
//! server, never from the model: see [`context`]. The tools are in [`tools`]; [`server`] is the
//! `rmcp` glue.

pub mod context;
pub mod server;
pub mod tools;
pub mod transport;
pub mod turns;

pub use context::{repo_from_git, repo_id_from_url, McpArgs, McpContext};
pub use tools::{ToolDef, ToolReply, Tools};

use crate::store::{AnyStore, OpenMode};
use anyhow::{Context as _, Result};
use rmcp::ServiceExt;
use std::path::Path;

/// Resolves the context from flags, the environment and the working directory; a problem is a
/// usage error (exit 2).
pub fn context_from_process(args: &McpArgs) -> Result<McpContext> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    McpContext::resolve(args, |k| std::env::var(k).ok(), &cwd).map_err(crate::frontend::usage)
}

/// How often a serving process looks whether the database has gone idle (`Tools::idle`).
const IDLE_TICK: std::time::Duration = std::time::Duration::from_millis(300);

/// Serves MCP on stdin/stdout until the client closes the connection. Returns the exit code.
pub fn run(db: &Path, args: McpArgs) -> Result<i32> {
    // The CLI ends quietly on a closed pipe (`main`); a server whose client stops reading
    // says so and winds down instead of dying on the signal (found by review: killed by
    // SIGPIPE, without a word).
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let ctx = context_from_process(&args)?;
    // One store for the server's life: a bad path fails before the host connects, and the
    // tool calls share one connection, taking turns (see `Tools`).
    let store = AnyStore::open(db, OpenMode::Create)?;
    // A PostgreSQL address is named without its password.
    let place = match crate::store::postgres::Address::recognise(db.as_os_str()) {
        Some(Ok(address)) => address.describe(),
        _ => db.display().to_string(),
    };
    let mut notes = vec![format!("database {place}")];
    if store.is_read_only() {
        notes.push("read-only".into());
    }
    if ctx.allow_forget {
        notes.push("forget allowed".into());
    }
    notes.extend(ctx.repo_note.clone());
    let tools = std::sync::Arc::new(Tools::new(ctx, store));
    // The subject and places as stored, as the instructions and every answer name them (found
    // by review: the line said `USER:页` where the answers said `user:页`).
    crate::frontend::errln!(
        "memscope mcp: serving {} on stdio ({})",
        tools.described(),
        notes.join(", ")
    );
    // The store is dropped here, after the runtime, never inside it: closing a PostgreSQL
    // connection blocks on the driver's own runtime, which may not start inside another.
    let store_owner = tools.clone();
    let io = transport::stdio().context("cannot start the stdio transport")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let idle_tools = tools.clone();
    let (sink, stream) = (io.sink, io.stream);
    let mut handshake_failed = false;
    let served = runtime.block_on(async {
        let service = match server::MemscopeServer::new(tools)
            .serve((sink, stream))
            .await
        {
            Ok(service) => service,
            Err(e) => {
                handshake_failed = true;
                return Err(handshake_failure(&e));
            }
        };
        let idle = tokio::spawn(async move {
            let mut tick = tokio::time::interval(IDLE_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let tools = idle_tools.clone();
                let _ = tokio::task::spawn_blocking(move || tools.idle()).await;
            }
        });
        let waited = service.waiting().await;
        idle.abort();
        waited.map_err(|e| anyhow::anyhow!("the MCP session ended abnormally: {e}"))?;
        anyhow::Ok(())
    });
    // A call still running when the client left may finish its transaction; then stop.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    if handshake_failed {
        // No session began, so no call ran: every request read is answered so, and the server
        // ends without waiting for the client to close its input (the reader may still be
        // reading it).
        io.stopped.answer_the_rest();
    } else {
        drop(io.stopped);
        // Every answer given is written out before the process ends.
        let _ = io.writer.join();
    }
    drop(store_owner);
    served?;
    Ok(crate::frontend::EXIT_OK)
}

/// rmcp's handshake error in one sentence: its text names the message it met, in Rust's debug
/// notation, which says nothing to a person; the kind of message is what helps.
fn handshake_failure(e: &rmcp::service::ServerInitializeError) -> anyhow::Error {
    let text = e.to_string();
    let met = ["Notification", "Request", "Response", "Error"]
        .into_iter()
        .find(|kind| text.contains(&format!("Some({kind}(")));
    match met {
        Some(kind) => anyhow::anyhow!(
            "the MCP handshake failed: the client sent a {} before an `initialize` request the server accepted — start the session with a valid `initialize` request, then `notifications/initialized`",
            kind.to_lowercase()
        ),
        None if text.contains("connection closed") => anyhow::anyhow!(
            "the MCP client closed its input before the server accepted an `initialize` request: start the session with a valid `initialize` request"
        ),
        None => anyhow::anyhow!(
            "the MCP handshake failed ({}): start the session with a valid `initialize` request",
            crate::model::shorten(&text, 200)
        ),
    }
}
