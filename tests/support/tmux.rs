//! A real terminal for tests: a tmux server on a private socket, driven with `send-keys` and
//! read with `capture-pane`, synchronised by waiting for text on screen.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

static SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// A tmux server on a private socket; killed when dropped, also when a test fails.
pub struct Tmux {
    socket: String,
    socket_path: Option<PathBuf>,
}

impl Tmux {
    pub fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    pub fn start(width: u16, height: u16) -> Tmux {
        let n = SESSIONS.fetch_add(1, Ordering::SeqCst);
        let mut t = Tmux {
            socket: format!("memscope-e2e-{}-{n}", std::process::id()),
            socket_path: None,
        };
        t.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "e2e",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "sh",
        ]);
        t.tmux(&["set-option", "-g", "escape-time", "0"]);
        let path = t.tmux(&["display-message", "-p", "#{socket_path}"]).stdout;
        t.socket_path = Some(PathBuf::from(String::from_utf8_lossy(&path).trim()));
        t
    }

    /// A `width`×`height` terminal at a plain `$ ` prompt on a clear screen; `None`, after
    /// saying SKIPPED, where tmux is not installed.
    pub fn shell(width: u16, height: u16) -> Option<Tmux> {
        if !Tmux::available() {
            eprintln!("SKIPPED: tmux is not installed (CI installs it; see .ci/run)");
            return None;
        }
        let t = Tmux::start(width, height);
        t.run("PS1='$ '; clear");
        Some(t)
    }

    pub fn tmux(&self, args: &[&str]) -> Output {
        super::output_ok(
            Command::new("tmux")
                .arg("-L")
                .arg(&self.socket)
                .args(args)
                .env_remove("TMUX"),
            &format!("tmux {args:?}"),
        )
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "e2e", "-l", text]);
    }

    /// Sends named keys (Enter, Escape, …).
    pub fn key(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "e2e", key]);
    }

    pub fn run(&self, command_line: &str) {
        self.type_text(command_line);
        self.key("Enter");
    }

    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "e2e"]).stdout)
            .into_owned()
    }

    /// Polls the screen until `pred` holds on a settled frame — the same screen twice in a
    /// row, so a frame the terminal is still receiving (a capture can land half-way through
    /// one) is never what a test asserts on; panics with the last screen after the timeout.
    pub fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        let mut last: Option<String> = None;
        loop {
            let s = self.screen();
            if pred(&s) {
                if last.as_deref() == Some(s.as_str()) {
                    return s;
                }
                last = Some(s);
                std::thread::sleep(Duration::from_millis(30));
                continue;
            }
            last = None;
            if start.elapsed() > TIMEOUT {
                panic!("timed out waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_for(&self, text: &str) -> String {
        self.wait(&format!("{text:?}"), |s| s.contains(text))
    }

    /// Waits for `text`, then asserts that the same screen shows each of `also`; the screen.
    #[track_caller]
    pub fn wait_showing(&self, text: &str, also: &[&str]) -> String {
        let screen = self.wait_for(text);
        for words in also {
            assert!(
                screen.contains(words),
                "{words:?} is not on screen:\n{screen}"
            );
        }
        screen
    }

    pub fn resize(&self, width: u16, height: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            "e2e",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        if let Some(p) = &self.socket_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `p` as one single-quoted shell word.
pub fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}
