//! The database holds the user's own words: memscope creates it, its `-wal` and `-shm` and its
//! folders for their owner alone, and `check` names any of them that group or others can reach.
//! Paths and `stat` only — the database files themselves are SQLite's to open (see
//! [`super::Store::open`]).

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Runs `create` with the process umask at 077, so the database file SQLite creates in it is
/// readable by its owner alone; SQLite gives the `-wal` and `-shm` the database file's
/// permissions when it creates them later. The umask is process-wide: a lock keeps two
/// creations from interleaving, and another thread creating a file meanwhile only gets a
/// stricter mode.
#[cfg(unix)]
pub(crate) fn create_private<T>(create: impl FnOnce() -> T) -> T {
    static UMASK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = UMASK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // SAFETY: umask has no preconditions and cannot fail; the old mask is put back below.
    let previous = unsafe { libc::umask(0o077) };
    let out = create();
    // SAFETY: as above.
    unsafe { libc::umask(previous) };
    out
}

#[cfg(not(unix))]
pub(crate) fn create_private<T>(create: impl FnOnce() -> T) -> T {
    create()
}

/// Creates `dir` and any missing parents, each `0700` (what already exists is left as it is).
pub(crate) fn create_private_dirs(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))
}

/// A file or folder of the database that group or others have permissions on, and the
/// command that makes it private.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exposure {
    pub path: String,
    /// `database`, `WAL`, `shared-memory file` or `folder`.
    pub kind: &'static str,
    /// The permission bits, octal (`0644`).
    pub mode: String,
    /// Paste to fix: `chmod go-rwx PATH`.
    pub fix: String,
}

impl Exposure {
    /// `the database /x/memory.db is open to group or others (mode 0644): run `chmod …``.
    pub fn sentence(&self) -> String {
        format!(
            "the {} {} is open to group or others (mode {}): run `{}`",
            self.kind, self.path, self.mode, self.fix
        )
    }
}

/// The database and its folder, where group or others have any permission on them — among
/// those the database's owner owns (the folder of `/tmp/x.db` is root's, not the user's to
/// change). The `-wal` and `-shm` take the database's mode whenever SQLite creates them, so
/// they are named only when the database is private and they are not: left from before.
#[cfg(unix)]
pub(crate) fn exposures(db: &Path) -> Vec<Exposure> {
    use std::os::unix::fs::MetadataExt;
    // `stat` only: no descriptor is opened on the database files.
    let Ok(owner) = std::fs::metadata(db).map(|m| m.uid()) else {
        return Vec::new();
    };
    let exposed = |path: PathBuf, kind: &'static str| {
        let meta = std::fs::metadata(&path).ok()?;
        let mode = meta.mode() & 0o777;
        (meta.uid() == owner && mode & 0o077 != 0).then(|| {
            let shown = path.display().to_string();
            Exposure {
                fix: format!("chmod go-rwx {}", crate::model::shell_word(&shown)),
                path: shown,
                kind,
                mode: format!("{mode:04o}"),
            }
        })
    };
    let with_suffix = |suffix: &str| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let folder = match db.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // `/home/me/notes`, not `.`, in the command to paste.
    let folder = std::fs::canonicalize(&folder).unwrap_or(folder);
    let mut found: Vec<Exposure> = exposed(db.to_path_buf(), "database").into_iter().collect();
    if found.is_empty() {
        found.extend(exposed(with_suffix("-wal"), "WAL"));
        found.extend(exposed(with_suffix("-shm"), "shared-memory file"));
    }
    found.extend(exposed(folder, "folder"));
    found
}

#[cfg(not(unix))]
pub(crate) fn exposures(_db: &Path) -> Vec<Exposure> {
    Vec::new()
}
