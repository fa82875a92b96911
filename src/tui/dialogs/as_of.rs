//! A read explained as of its time (`Enter` on a read): what the agent got then, what the
//! read log noted, and what the same read gets today; `g` opens the record's history.

use super::{centered, frame_box, Step};
use crate::model::{ReadRecord, Resolution};
use crate::tui::app::Action;
use crate::tui::draw::{bold, dim, error_style, part, plain, row_line};
use crate::tui::incident::{read_context, TimelineMark, NO_RECORD};
use crate::tui::keymap::{Command, Context};
use crate::tui::tabs::reads::{considered_lines, winner};
use crate::tui::tabs::Shell;
use crate::tui::text::{ago, one_line, short_time, value_text};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// A read's resolution as it stood then, and the same read today.
#[derive(Debug, Clone, PartialEq)]
pub struct AsOf {
    pub then: Resolution,
    pub now: Resolution,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AsOfDialog {
    pub read: ReadRecord,
    pub result: Option<Result<AsOf, String>>,
}

impl AsOfDialog {
    pub fn key(&mut self, cmd: Option<Command>, shell: &mut Shell<'_>) -> Step {
        match cmd {
            Some(Command::GoToRecord) => match TimelineMark::of_read(&self.read, shell.now) {
                Some(mark) => {
                    // The history opens in the current view: no dialog stays over it.
                    shell.dialogs.clear();
                    Step::Close(Action::GoTo(mark))
                }
                None => {
                    shell.info(NO_RECORD);
                    Step::Stay(Action::None)
                }
            },
            Some(Command::Cancel) => Step::Close(Action::None),
            _ => Step::Stay(Action::None),
        }
    }

    pub fn draw(&self, frame: &mut Frame<'_>, area: Rect, now: DateTime<Utc>) {
        let d = self;
        let width = 96.min(area.width);
        let max = width.saturating_sub(2) as usize;
        let r = &d.read;
        let mut lines = vec![row_line(
            &[
                part(
                    one_line(r.agent.as_deref().unwrap_or("an agent")),
                    bold().fg(Color::Cyan),
                ),
                part(format!(" read in {}", read_context(r)), Style::new()),
                part(
                    format!(" · {} UTC ({})", short_time(&r.at), ago(now, &r.at)),
                    dim(),
                ),
            ],
            &[],
            max,
        )];
        if let Some(n) = &r.note {
            lines.push(plain(&format!("“{n}”"), dim(), max));
        }
        lines.push(Line::raw(""));
        match &d.result {
            None => lines.push(plain("replaying history…", dim(), max)),
            Some(Err(e)) => lines.push(plain(e, error_style(), max)),
            Some(Ok(AsOf {
                then,
                now: today_res,
            })) => {
                lines.push(plain(
                    "The chain as it stood then (task, then repo, then global; the first found wins):",
                    dim(),
                    max,
                ));
                for c in &then.considered {
                    lines.extend(considered_lines(c, now, max));
                }
                lines.push(Line::raw(""));
                let got_then = winner(then);
                lines.push(row_line(
                    &[
                        part("→ the agent got ", Style::new()),
                        part(got_then, bold().fg(Color::Green)),
                    ],
                    &[],
                    max,
                ));
                let shadowed: Vec<String> = then
                    .considered
                    .iter()
                    .filter(|c| c.state.starts_with("shadowed"))
                    .map(|c| match &c.value {
                        Some(v) => format!("{} ({})", c.scope, value_text(v)),
                        None => format!("{} (its content destroyed since)", c.scope),
                    })
                    .collect();
                if !shadowed.is_empty() {
                    lines.push(plain(
                        &format!("  and it shadowed {}", shadowed.join(", ")),
                        dim(),
                        max,
                    ));
                }
                let (text, agrees) = agreement(r, then);
                let style = if agrees {
                    dim()
                } else {
                    Style::new().fg(Color::Yellow)
                };
                lines.push(plain(&text, style, max));
                let today = winner(today_res);
                let same = today_res.scope == then.scope && today_res.version == then.version;
                lines.push(row_line(
                    &[
                        part("Today the same read gets ", Style::new()),
                        part(
                            today,
                            if same {
                                bold()
                            } else {
                                bold().fg(Color::Green)
                            },
                        ),
                        part(if same { " (unchanged)" } else { "" }, dim()),
                    ],
                    &[],
                    max,
                ));
                lines.push(Line::raw(""));
                // `g` goes to the record's history in the current view: offered only while
                // the scope holds a live record (a deleted or moved one has nothing to show).
                let live_now = |scope: &String| {
                    today_res
                        .considered
                        .iter()
                        .any(|c| &c.scope == scope && c.found)
                };
                match (&r.scope, r.version) {
                    (Some(scope), Some(_)) if !live_now(scope) => lines.push(plain(
                        &format!(
                            "{scope} holds no live record now: its history is not in the current view"
                        ),
                        dim(),
                        max,
                    )),
                    (Some(scope), Some(v)) => lines.push(row_line(
                        &[
                            part("g", bold().fg(Color::Cyan)),
                            part(
                                format!(
                                    " the history of {scope}, v{v} highlighted (then m rescopes, v reverts)"
                                ),
                                Style::new(),
                            ),
                        ],
                        &[],
                        max,
                    )),
                    _ => {}
                }
            }
        }
        let rect = centered(area, width, lines.len() as u16 + 2);
        let title = format!("As of a read · {} · {}", r.subject, r.predicate);
        let inner = frame_box(frame, rect, &title, Context::AsOf);
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

/// Whether the log's own record of the read agrees with what history replays, in the words the
/// dialog says it with. A winner deleted since keeps only that its scope held a value then (the
/// delete destroyed its versions): the scope agreeing is all history can confirm, not a
/// disagreement.
fn agreement(r: &ReadRecord, then: &Resolution) -> (String, bool) {
    let logged = r.got();
    let replayed = match (&then.scope, then.version) {
        (Some(s), Some(v)) => format!("{s} v{v}"),
        (Some(s), None) => s.clone(),
        _ => "nothing".into(),
    };
    if logged == replayed {
        (format!("  the read log agrees: {logged}"), true)
    } else if r.version.is_none() && r.scope.is_some() {
        // A read `alias add` moved keeps only its scope: what it got was a memory of the
        // alias's own name, whose history this replay (of the canonical name's) cannot see
        // (README, `alias add`) — neither a confirmation nor a disagreement.
        (
            format!("  the read log keeps only the scope, {logged}: an alias moved the read here from another name, whose history this replay does not hold"),
            true,
        )
    } else if then.version.is_none() && then.scope.is_some() && then.scope == r.scope {
        (
            format!("  the read log says {logged}, deleted since: history confirms only the scope"),
            true,
        )
    } else {
        (
            format!("  ⚠ the read log says {logged}; history replays {replayed}"),
            false,
        )
    }
}
