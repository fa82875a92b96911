//! Open dialogs after a refresh (README, "The terminal UI", live refresh): a dialog that shows
//! stored words reads them again, and one whose subject another process deleted gives way to a
//! message — no popup keeps a deleted memory's words on screen, and none offers a change on
//! what is gone. The lists and panes reload themselves (`TabComponent::reload`); this is the
//! dialogs' half.

use super::app::{Curation, Dialog};
use super::dialogs::{AsOf, ExplainQuery};
use super::repair;
use super::tabs::pending;
use crate::model::{ReadRecord, Resolution};
use crate::store::UiStore;
use anyhow::Result;

/// The title of the message a dialog gives way to.
pub const GONE_TITLE: &str = "Changed by another process";

/// Reads again what each open dialog shows. The first dialog whose subject is gone is replaced
/// by a message saying so, and the dialogs opened over it (a confirmation of its change) close
/// with it. A delete dialog's preview comes from a worker: the returned target is to be asked
/// again when that dialog is on top.
pub fn refresh_dialogs(
    store: &mut dyn UiStore,
    dialogs: &mut Vec<Dialog>,
) -> Result<Option<crate::model::DeleteTarget>> {
    for i in 0..dialogs.len() {
        if let Some(why) = refresh(store, &mut dialogs[i])? {
            dialogs.truncate(i);
            dialogs.push(Dialog::Message {
                title: GONE_TITLE.to_string(),
                text: why,
            });
            return Ok(None);
        }
    }
    Ok(match dialogs.last() {
        Some(Dialog::Delete(d)) => Some(d.target()),
        _ => None,
    })
}

/// Closes the first dialog that would change data, and those opened over it, when the lists
/// could not be loaded again (`why`): a message says so, and that nothing was done.
pub fn close_acting_dialogs(dialogs: &mut Vec<Dialog>, why: &str) {
    let acting = dialogs.iter().position(|d| {
        matches!(
            d,
            Dialog::Delete(_) | Dialog::Confirm(_) | Dialog::Rescope(_) | Dialog::Revert(_)
        )
    });
    if let Some(i) = acting {
        dialogs.truncate(i);
        dialogs.push(Dialog::Message {
            title: GONE_TITLE.to_string(),
            // What happened first; a long reason wraps, the box keeping its end (`message::draw`).
            text: format!(
                "The dialog was closed and nothing was done: the rows it was opened on could not be read again ({why})."
            ),
        });
    }
}

/// Refreshes one dialog in place; `Some(sentence)` when what it shows is gone.
fn refresh(store: &mut dyn UiStore, dialog: &mut Dialog) -> Result<Option<String>> {
    match dialog {
        Dialog::Event(d) => match store.history_event(d.event().id)? {
            Some(event) => d.set_event(event),
            None => {
                return Ok(Some(format!(
                    "The event you had open ({} of {}) was deleted: its words are gone from the \
                     database and from this screen.",
                    d.event().event,
                    d.identity
                )))
            }
        },
        Dialog::Revert(d) => {
            let id = d.record.identity();
            let Some(record) = store.get(&id)? else {
                return Ok(Some(no_record(&id)));
            };
            d.record = record;
            if d.choices.is_some() {
                // The choice is a version: it stays on that version whatever came before it.
                let chosen = d.chosen().map(|c| c.version);
                let choices = repair::revert_choices(store, &d.record)
                    .map_err(|e| crate::store::error_text(&e));
                let at = match (&choices, chosen) {
                    (Ok(list), Some(v)) => match list.list.iter().position(|c| c.version == v) {
                        Some(at) => Some(at),
                        None => {
                            return Ok(Some(format!(
                                "v{v} of {} is no longer in its history: the revert dialog closed \
                                 and nothing was changed.",
                                d.record.identity()
                            )))
                        }
                    },
                    _ => None,
                };
                d.take_choices(choices);
                d.choice = at.unwrap_or(0);
                if let Some(version) = d.effect_wanted() {
                    let effect = repair::revert_effect(store, &d.record, version);
                    d.take_effect(version, effect);
                }
            }
        }
        Dialog::Rescope(d) => {
            let id = d.record.identity();
            let Some(record) = store.get(&id)? else {
                return Ok(Some(no_record(&id)));
            };
            // A rescope moves one value: another version is another decision (its suggestion
            // was made for the words of the version the dialog opened on).
            if record.version != d.record.version {
                return Ok(Some(format!(
                    "{id} is at v{} now (another process wrote or moved it): the rescope dialog on v{} closed and nothing was changed — press m again to move what it holds now.",
                    record.version, d.record.version
                )));
            }
            d.record = record;
            if d.preview.is_some() {
                d.preview = Some(repair::rescope_preview(store, &d.record, &d.target));
            }
        }
        Dialog::Explain(d) => {
            if let (Some(_), Ok(q)) = (&d.result, d.query()) {
                d.take(&q, &explain(store, &q));
            }
        }
        Dialog::AsOf(d) => {
            let Some(read) = store.read_record(d.read.id)? else {
                return Ok(Some(format!(
                    "The read you had open (#{}) is no longer in the read log.",
                    d.read.id
                )));
            };
            d.read = read;
            if d.result.is_some() {
                d.result = Some(as_of(store, &d.read));
            }
        }
        Dialog::Confirm(c) => match &c.curation {
            Curation::Resolve { pending_id, .. } | Curation::Reject { pending_id } => {
                let open = store.pending(false)?;
                let Some(item) = open.iter().find(|p| p.id == *pending_id) else {
                    return Ok(Some(format!(
                        "Pending #{pending_id} is no longer waiting (resolved, rejected or deleted \
                         by another process): this dialog changed nothing."
                    )));
                };
                // What `y` would do now, as the store decides it today.
                if let Curation::Resolve { scope, .. } = &c.curation {
                    let preview = pending::preview(store, item)?;
                    let Some(now) = pending::resolve_confirm(item, &preview, scope) else {
                        return Ok(Some(format!(
                            "Pending #{pending_id} no longer offers {scope}: nothing was written."
                        )));
                    };
                    *c = now;
                }
            }
            Curation::Restore(id) => {
                let tombstoned = store.tombstones()?.iter().any(|t| {
                    t.subject == id.subject && t.predicate == id.predicate && t.scope == id.scope
                });
                if !tombstoned {
                    return Ok(Some(format!(
                        "{id} is no longer deleted (restored by another process, or its tombstone collected): nothing was changed."
                    )));
                }
            }
            Curation::Delete(_) | Curation::Rescope { .. } | Curation::Revert { .. } => {}
        },
        Dialog::Delete(_) | Dialog::Help { .. } | Dialog::Message { .. } => {}
    }
    Ok(None)
}

fn no_record(id: &crate::model::Identity) -> String {
    format!(
        "{id} holds no live record now (deleted, rescoped or gone stale): the dialog on it closed \
         and nothing was changed."
    )
}

/// The explain dialog's question answered by the store.
pub fn explain(store: &dyn UiStore, q: &ExplainQuery) -> Result<Resolution, String> {
    store
        .resolve(
            &q.subject,
            &q.predicate,
            q.repo.as_deref(),
            q.task.as_deref(),
        )
        .map_err(|e| crate::store::error_text(&e))
}

/// A read resolved as it stood at its time, and as it resolves now: the as-of dialog's text.
pub fn as_of(store: &dyn UiStore, r: &ReadRecord) -> Result<AsOf, String> {
    chrono::DateTime::parse_from_rfc3339(&r.at)
        .map_err(|e| anyhow::anyhow!("the read's time {:?} is not RFC 3339: {e}", r.at))
        .and_then(|at| {
            let (repo, task) = (r.repo.as_deref(), r.task.as_deref());
            Ok(AsOf {
                then: store.resolve_at(
                    &r.subject,
                    &r.predicate,
                    repo,
                    task,
                    at.with_timezone(&chrono::Utc),
                )?,
                now: store.resolve(&r.subject, &r.predicate, repo, task)?,
            })
        })
        .map_err(|e| crate::store::error_text(&e))
}
