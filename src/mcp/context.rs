//! The runtime context of an MCP session: who the memories are about and where the agent is
//! working. These ids come from the host that starts the server (flags, environment, the git
//! checkout it runs in), never from the model.

use crate::model::{
    agent_name, named_context_id, normalize_subject, within_id_limit, ContextKind, Scope,
};
use clap::Args;
use std::path::Path;
use std::process::Command;

/// `memscope mcp` flags. Each falls back to an environment variable.
#[derive(Debug, Clone, Default, Args)]
pub struct McpArgs {
    /// Who the memories are about, e.g. user:42 (else $MEMSCOPE_SUBJECT)
    #[arg(long, value_name = "SUBJECT")]
    pub subject: Option<String>,
    /// The repository the agent works in, e.g. web-app or repo:web-app (else $MEMSCOPE_REPO);
    /// `auto` takes the id from the working directory's git checkout: the origin remote's name,
    /// else the top-level folder
    #[arg(long, value_name = "ID|auto")]
    pub repo: Option<String>,
    /// The task the agent works on, e.g. fix-1 or task:fix-1 (else $MEMSCOPE_TASK)
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// The agent's name, recorded with every read it makes (else $MEMSCOPE_AGENT, else the MCP
    /// client's own name)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Offer the `forget` tool (delete with purge); without it the model cannot delete
    #[arg(long)]
    pub allow_forget: bool,
}

/// The resolved context every tool call runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpContext {
    pub subject: String,
    pub repo: Option<String>,
    pub task: Option<String>,
    pub agent: Option<String>,
    pub allow_forget: bool,
    /// Why `--repo auto` named the repository by its folder though it has an origin remote
    /// (said when the server starts).
    pub repo_note: Option<String>,
}

impl McpContext {
    /// Resolves flags, then environment variables (`env` looks one up; empty counts as unset),
    /// then `--repo auto` against `cwd`. The error is one sentence naming the flag to fix.
    pub fn resolve(
        args: &McpArgs,
        env: impl Fn(&str) -> Option<String>,
        cwd: &Path,
    ) -> Result<McpContext, String> {
        let pick =
            |flag: &Option<String>, flag_name: &str, var: &str| -> (Option<String>, String) {
                match flag {
                    Some(v) => (Some(v.clone()), format!("--{flag_name}")),
                    None => (env(var).filter(|v| !v.is_empty()), format!("${var}")),
                }
            };
        let (subject, subject_from) = pick(&args.subject, "subject", "MEMSCOPE_SUBJECT");
        let subject = match subject {
            None => {
                return Err(
                    "memscope mcp needs to know whose memory it serves: pass --subject user:42 or set MEMSCOPE_SUBJECT"
                        .into(),
                )
            }
            Some(s) => normalize_subject(&s).map_err(|e| format!("{subject_from}: {e}"))?,
        };
        // Every `remember` names these: a context no write could store is refused before
        // serving, rather than failing each call with advice only the host can follow.
        within_id_limit("subject", &subject).map_err(|e| format!("{subject_from}: {e}"))?;
        let (repo, repo_from) = pick(&args.repo, "repo", "MEMSCOPE_REPO");
        let (repo, repo_note) = match repo {
            Some(r) if r.trim() == "auto" => {
                let (id, note) = repo_from_git(cwd)?;
                (Some(id), note)
            }
            Some(r) => (Some(context_id(ContextKind::Repo, &r, &repo_from)?), None),
            None => (None, None),
        };
        let (task, task_from) = pick(&args.task, "task", "MEMSCOPE_TASK");
        let task = match task {
            // Said, not taken as a task named `auto` (found by review: `--repo auto` detects,
            // so `--task auto` read as if it did too).
            Some(t) if t.trim() == "auto" => {
                return Err(format!(
                    "{task_from} auto: memscope cannot find the task by itself (only the host knows what the agent works on, an issue or a branch): pass --task ID, or task:auto for a task named auto"
                ))
            }
            Some(t) => Some(context_id(ContextKind::Task, &t, &task_from)?),
            None => None,
        };
        let (agent, agent_from) = pick(&args.agent, "agent", "MEMSCOPE_AGENT");
        let agent = agent
            .map(|a| agent_name(&a).map_err(|e| format!("{agent_from} {e}")))
            .transpose()?;
        Ok(McpContext {
            subject,
            repo,
            task,
            agent,
            allow_forget: args.allow_forget,
            repo_note,
        })
    }

    /// The scopes this context reads, highest precedence first: task, repo, global.
    pub fn chain(&self) -> Vec<Scope> {
        let mut chain = Vec::with_capacity(3);
        if let Some(t) = &self.task {
            chain.push(Scope::Task(t.clone()));
        }
        if let Some(r) = &self.repo {
            chain.push(Scope::Repo(r.clone()));
        }
        chain.push(Scope::Global);
        chain
    }

    /// `user:42 in repo:legacy-dashboard, task:fix-1` — for messages.
    pub fn describe(&self) -> String {
        let mut places: Vec<String> = Vec::new();
        if let Some(r) = &self.repo {
            places.push(format!("repo:{r}"));
        }
        if let Some(t) = &self.task {
            places.push(format!("task:{t}"));
        }
        if places.is_empty() {
            format!(
                "{} (no repository or task context: global only)",
                self.subject
            )
        } else {
            format!("{} in {}", self.subject, places.join(", "))
        }
    }
}

/// Checks a repo or task id the way every front end does ([`named_context_id`]), and its length.
fn context_id(kind: ContextKind, id: &str, from: &str) -> Result<String, String> {
    let id = named_context_id(kind, id, from)?;
    within_id_limit(&format!("{} id", kind.noun()), &id).map_err(|e| format!("{from}: {e}"))?;
    Ok(id)
}

/// The repository id for `--repo auto`: the last path component of the `origin` remote's URL
/// without `.git`, else the name of the checkout's top-level folder — with, when an origin
/// remote was there but gave no usable id, the sentence saying so (found by review: the folder's
/// name was taken without a word, and an agent's repo rules landed where the user did not look).
pub fn repo_from_git(dir: &Path) -> Result<(String, Option<String>), String> {
    // The working directory names the repository, whatever the host's environment points git at
    // (found by review: a server started with an inherited GIT_DIR took that repository's name):
    // the variables this git lists, and the ones git 2.47 did, in case it lists none.
    let mut local: Vec<String> = GIT_LOCAL_ENV.iter().map(|v| v.to_string()).collect();
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "--local-env-vars"])
        .stdin(std::process::Stdio::null())
        .output()
    {
        let listed = String::from_utf8_lossy(&out.stdout).into_owned();
        local.extend(
            (listed.lines())
                .map(str::trim)
                .filter(|v| v.starts_with("GIT_"))
                .map(str::to_string),
        );
    }
    // What git printed: its answer (`Ok`, empty when it had none), or what it said failing.
    let git = |args: &[&str]| -> Result<Result<String, String>, String> {
        let mut git = Command::new("git");
        for var in &local {
            git.env_remove(var);
        }
        let out = git
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "--repo auto needs git to find the repository, but `git` could not be run ({e}): pass --repo ID instead"
                )
            })?;
        if !out.status.success() {
            return Ok(Err(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        Ok(Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    };
    let top = match git(&["rev-parse", "--show-toplevel"])? {
        Ok(top) if !top.is_empty() => top,
        // git (2.35.2 and later) refuses a checkout another user owns, whatever is asked.
        Err(said) if said.contains("dubious ownership") => {
            return Err(format!(
                "--repo auto: git refuses the repository around {} because another user owns it (git's safe.directory check): mark it safe with `git config --global --add safe.directory PATH` as the user running memscope, or pass --repo ID",
                dir.display()
            ))
        }
        _ => {
            return Err(format!(
                "--repo auto: {} is not inside a git repository, so there is no repository id to take: pass --repo ID, or start memscope mcp from the repository",
                dir.display()
            ))
        }
    };
    let mut note = None;
    if let Ok(url) = git(&["config", "--get", "remote.origin.url"])? {
        if let Some(id) = repo_id_from_url(&url) {
            return Ok((id, None));
        }
        if !url.is_empty() {
            note = Some(format!(
                "--repo auto: the origin remote {} leaves no usable repository id ({}), so the checkout's folder names it; pass --repo ID to choose",
                crate::model::to_json(&crate::model::shorten(&url, 80)).unwrap_or_default(),
                unusable(&url_component(&url))
            ));
        }
    }
    let folder = Path::new(&top)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = context_id(ContextKind::Repo, &folder, "--repo auto").map_err(|_| {
        format!(
            "--repo auto: the repository at {top} has no usable origin remote and its folder name is not a usable id ({}): pass --repo ID",
            unusable(&folder)
        )
    })?;
    Ok((id, note))
}

/// The variables that point git at a repository other than the one around its working
/// directory: what `git rev-parse --local-env-vars` lists (here as git 2.47 lists them; the
/// running git is asked too), which git itself clears before it works in another repository
/// (a submodule).
const GIT_LOCAL_ENV: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
];

/// Why `name` is no repository id, in the words `--repo auto` says it with.
fn unusable(name: &str) -> String {
    crate::model::past_id_limit("its name", name.trim())
        .unwrap_or_else(|| "one word: no spaces, control or direction characters".to_string())
}

/// The last path component of a remote's URL without `.git`, percent-decoded when the remote
/// is a URL with a scheme (`https://host/acme/%E7%BD%91%E7%AB%99.git` is the repository 网站,
/// as a checkout of `…/网站.git` names it: found by review, one repository was two places).
/// A local path or an scp-like `host:path` is taken as written: `%` is an ordinary character
/// there.
fn url_component(url: &str) -> std::borrow::Cow<'_, str> {
    let trimmed = url.trim().trim_end_matches(['/', '\\']);
    let last = trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed);
    // A colon parts host from path only in an scp-like `host:name.git`, which has no slash;
    // elsewhere it is part of the name (`/srv/task:x.git` is no repository `x`: found by review).
    let last = if trimmed.contains(['/', '\\']) {
        last
    } else {
        // git's rule: the first colon ends the host (`host:a:b.git` is the repository `a:b`).
        last.split_once(':').map_or(last, |(_, name)| name)
    };
    let last = last.strip_suffix(".git").unwrap_or(last);
    if trimmed.contains("://") {
        crate::model::percent_decoded(last)
    } else {
        last.into()
    }
}

/// `https://github.com/acme/legacy-dashboard.git`, `git@github.com:acme/legacy-dashboard.git`,
/// `/srv/git/legacy-dashboard/` → `legacy-dashboard`. `None` when nothing usable remains.
pub fn repo_id_from_url(url: &str) -> Option<String> {
    context_id(ContextKind::Repo, &url_component(url), "origin").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_give_the_last_component() {
        for url in [
            "https://github.com/acme/legacy-dashboard.git",
            "https://github.com/acme/legacy-dashboard",
            "git@github.com:acme/legacy-dashboard.git",
            "ssh://git@host:22/acme/legacy-dashboard.git/",
            "/srv/git/legacy-dashboard/",
            "git@host:legacy-dashboard.git",
            "C:\\src\\legacy-dashboard",
        ] {
            assert_eq!(
                repo_id_from_url(url).as_deref(),
                Some("legacy-dashboard"),
                "{url}"
            );
        }
        // A URL's last component is percent-decoded; a path or scp-like remote is not.
        for (url, id) in [
            (
                "https://example.com/acme/%E7%BD%91%E7%AB%99.git",
                Some("网站"),
            ),
            (
                "ssh://git@host/acme/%E7%BD%91%E7%AB%99%F0%9F%9A%80",
                Some("网站🚀"),
            ),
            ("https://host/acme/a%2db.git", Some("a-b")),
            ("https://host/acme/my%20repo.git", None),
            ("https://host/acme/bad%FF.git", Some("bad%FF")),
            ("https://host/acme/half%E7%BD.git", Some("half%E7%BD")),
            ("https://host/acme/trail%", Some("trail%")),
            ("/srv/git/a%2db", Some("a%2db")),
            ("git@host:acme/a%2db.git", Some("a%2db")),
        ] {
            assert_eq!(repo_id_from_url(url).as_deref(), id, "{url}");
        }
        // A colon inside a path's last component is part of the name, not an scp-like host's
        // end: `task:x` is no repository id.
        assert_eq!(repo_id_from_url("/srv/task:x.git"), None);
        assert_eq!(repo_id_from_url("host:a:b.git").as_deref(), Some("a:b"));
        assert_eq!(repo_id_from_url("git@host:acme/task:x.git"), None);
        assert_eq!(
            repo_id_from_url("ssh://host/a/b:c.git").as_deref(),
            Some("b:c")
        );
        assert_eq!(
            repo_id_from_url("host:web-app.git").as_deref(),
            Some("web-app")
        );
        assert_eq!(repo_id_from_url("https://host/acme/.git"), None);
        assert_eq!(repo_id_from_url(""), None);
        assert_eq!(repo_id_from_url("/srv/my repo.git"), None);
    }
}
