//! The terminal UI at the edges users reach (README, "Performance"): a record with a 50,000-version
//! history (an agent flipping a value back and forth) and records holding 5 MB values, among
//! ordinary ones. Driven headless (TestBackend) as `benches/ui.rs` is; each figure is the time
//! from a key to its frame drawn. `cargo bench --bench ui_edges`; `MEMSCOPE_BENCH_VERSIONS=N`
//! for another history length. The database is generated once through `memscope apply` and
//! cached under target/.

#[path = "support/mod.rs"]
mod support;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use memscope::store::{Clock, OpenMode, Store};
use memscope::tui::{Focus, Session, WorkerMode};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;
/// The size of each large value.
const BIG: usize = 5 << 20;
const TARGET_MS: f64 = 16.0;

fn line(subject: &str, predicate: &str, value: &str, source: &str) -> String {
    serde_json::json!({
        "subject": subject,
        "predicate": predicate,
        "value": value,
        "scope": "global",
        "source": source,
    })
    .to_string()
}

/// Ordinary records before and after, the heavy identity (`user:m-heavy · package_manager`),
/// and two records of 5 MB each, written twice so that their history holds 5 MB events too.
fn lines(versions: usize) -> impl Iterator<Item = String> {
    let ordinary = (0..300).flat_map(|i| {
        ["a", "z"].map(|s| {
            line(
                &format!("user:{s}-{i:03}"),
                "formatter",
                "biome",
                "bench:edges",
            )
        })
    });
    let heavy = (0..versions).map(|i| {
        let value = if i % 2 == 0 {
            format!("CANARYVAL_a_{i}")
        } else {
            format!("CANARYVAL_b_{i}")
        };
        let source = format!("bench:thread:{i}");
        line("user:m-heavy", "package_manager", &value, &source)
    });
    let large = [("blob_a", 'a'), ("blob_b", 'b')]
        .into_iter()
        .flat_map(|(predicate, fill)| {
            (0..2).map(move |round| {
                let value = format!("{round}{}", fill.to_string().repeat(BIG));
                line("user:m-large", predicate, &value, "bench:large")
            })
        });
    ordinary.chain(heavy).chain(large)
}

fn database(versions: usize) -> PathBuf {
    let path = support::under_target(&format!("memscope-ui-edges-{versions}-v1.db"));
    if !path.exists() {
        eprintln!("generating the edge database ({versions} versions, 2 × 5 MB values)…");
        support::generate(&path, lines(versions));
    }
    path
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median, 99th percentile and maximum.
fn spread(samples: &mut [Duration]) -> (f64, f64, f64) {
    samples.sort();
    let at = |p: f64| ms(samples[((samples.len() as f64 - 1.0) * p).round() as usize]);
    (at(0.5), at(0.99), at(1.0))
}

struct Ui {
    session: Session,
    terminal: Terminal<TestBackend>,
}

impl Ui {
    fn open(path: &Path) -> Ui {
        let store = Store::open(path, OpenMode::Existing).expect("the bench database opens");
        let session = Session::new(
            Box::new(store),
            Clock::System,
            (WIDTH, HEIGHT),
            WorkerMode::Threads,
        )
        .expect("the UI opens");
        let mut ui = Ui {
            session,
            terminal: Terminal::new(TestBackend::new(WIDTH, HEIGHT)).expect("a test terminal"),
        };
        ui.idle();
        ui.draw();
        ui
    }

    fn draw(&mut self) {
        let session = &mut self.session;
        self.terminal.draw(|f| session.draw(f)).expect("a frame");
    }

    fn idle(&mut self) {
        let t = Instant::now();
        while self.session.busy() && t.elapsed() < Duration::from_secs(60) {
            self.session.pump();
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// One key, timed until its frame is drawn.
    fn press(&mut self, code: KeyCode) -> Duration {
        let t = Instant::now();
        self.session.handle_key(key(code));
        self.draw();
        t.elapsed()
    }

    fn selected(&self) -> String {
        self.session
            .app
            .memories()
            .list
            .selected_record()
            .map(|r| format!("{} · {}", r.subject, r.predicate))
            .unwrap_or_default()
    }

    /// Selects `before`, then times the key onto the record below it (`what`), whose pages are
    /// read from the OS for the first time: printed apart from the warm figures. Back up after.
    fn first_visit(&mut self, before: &str, what: &str) {
        self.select(before);
        let cold = self.press(KeyCode::Down);
        println!("  first key onto {what} (cold pages): {:.2} ms", ms(cold));
        self.press(KeyCode::Up);
    }

    /// Moves down the list until `label` is selected.
    fn select(&mut self, label: &str) {
        for _ in 0..2000 {
            if self.selected() == label {
                return;
            }
            self.session.handle_key(key(KeyCode::Down));
        }
        panic!("{label} is not in the list");
    }
}

fn report(name: &str, samples: &mut [Duration]) -> bool {
    let (median, p99, max) = spread(samples);
    let ok = max <= TARGET_MS;
    println!(
        "  {name:<44} {median:>7.2} ms median, {p99:>7.2} ms p99, {max:>7.2} ms max ({} keys)  target ≤ {TARGET_MS} ms  {}",
        samples.len(),
        if ok { "ok" } else { "OVER TARGET" }
    );
    ok
}

fn main() {
    let versions = support::size_from_env("MEMSCOPE_BENCH_VERSIONS", 50_000, 2_000) as usize;
    let path = database(versions);
    let mut ui = Ui::open(&path);
    println!(
        "memscope UI at the edges: one identity with {versions} versions, two records of {} MB, {WIDTH}×{HEIGHT}",
        BIG >> 20
    );
    let mut all_ok = true;

    // j/k onto the heavy identity and off it, both ways. The first visit reads its pages from
    // the OS for the first time: reported apart, then the warm figures.
    ui.first_visit(
        "user:a-299 · formatter",
        &format!("the {versions}-version record"),
    );
    let mut onto = Vec::new();
    for _ in 0..20 {
        onto.push(ui.press(KeyCode::Down)); // onto user:m-heavy
        assert_eq!(ui.selected(), "user:m-heavy · package_manager");
        onto.push(ui.press(KeyCode::Down)); // off it, down
        onto.push(ui.press(KeyCode::Up)); // onto it again
        onto.push(ui.press(KeyCode::Up)); // off it, up
    }
    all_ok &= report(
        &format!("j/k onto and off a {versions}-version record"),
        &mut onto,
    );

    // Its history pane: j/k, page down/up, End and Home.
    ui.press(KeyCode::Down);
    ui.press(KeyCode::Tab);
    assert_eq!(ui.session.app.focus, Focus::Detail);
    let mut scroll = Vec::new();
    for _ in 0..50 {
        scroll.push(ui.press(KeyCode::Down));
    }
    for _ in 0..20 {
        scroll.push(ui.press(KeyCode::PageDown));
    }
    scroll.push(ui.press(KeyCode::End));
    for _ in 0..20 {
        scroll.push(ui.press(KeyCode::PageUp));
    }
    for _ in 0..50 {
        scroll.push(ui.press(KeyCode::Up));
    }
    scroll.push(ui.press(KeyCode::Home));
    all_ok &= report("its history pane: j/k, PgDn/PgUp, End/Home", &mut scroll);
    ui.press(KeyCode::Esc);

    // Between the two 5 MB records, and its history pane.
    ui.first_visit("user:m-large · blob_a", "the second 5 MB record");
    let mut large = Vec::new();
    for _ in 0..10 {
        large.push(ui.press(KeyCode::Down));
        assert_eq!(ui.selected(), "user:m-large · blob_b");
        large.push(ui.press(KeyCode::Up));
    }
    all_ok &= report("j/k between two records of 5 MB", &mut large);
    ui.press(KeyCode::Tab);
    let mut large_history = Vec::new();
    for code in [
        KeyCode::Down,
        KeyCode::Down,
        KeyCode::Up,
        KeyCode::End,
        KeyCode::Home,
    ] {
        large_history.push(ui.press(code));
    }
    all_ok &= report("the 5 MB record's history pane: j/k", &mut large_history);
    println!(
        "{}",
        if all_ok {
            "all edge figures within target"
        } else {
            "SOME EDGE FIGURES OVER TARGET"
        }
    );
}
