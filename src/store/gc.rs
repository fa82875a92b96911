//! The decisions of `gc` (README, "delete, restore, gc"), one judge for both backends: which
//! periods apply (given, else saved in settings, else 0 = keep), what they save, the cutoffs
//! against now, which tombstones are safe to collect, and whether anything was purged (so the
//! backend makes the bytes unrecoverable: SQLite truncates its WAL, PostgreSQL vacuums).

use crate::model::InvalidRequest;
use anyhow::{bail, Result};
use chrono::{DateTime, Duration, Utc};

/// The longest period `gc` takes, in days (u32::MAX: 11.7 million years); the CLI's parser holds
/// its options to it, so every bad period reads one way.
pub const MAX_GC_DAYS: i64 = u32::MAX as i64;

pub(crate) const RETENTION_KEY: &str = "retention_days";
pub(crate) const TOMBSTONE_SAFE_KEY: &str = "tombstone_safe_days";

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GcReport {
    pub retention_days: i64,
    pub tombstone_safe_days: i64,
    pub purged_events: i64,
    pub purged_pending: i64,
    pub purged_reads: i64,
    pub collected_tombstones: i64,
    /// The sources of refused writes blanked at identities whose tombstones were collected
    /// (`events::BLANK_COLLECTED_SOURCES_SQL`).
    pub blanked_sources: i64,
    /// The history events a rescope left of a collected tombstone's memory where the value was
    /// first written, blanked before it was collected (a delete by an earlier release left them).
    pub blanked_copies: i64,
    pub disk_purged: bool,
    /// Why the purge did not reach the disk, when the backend can say (PostgreSQL: the role
    /// may not VACUUM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_note: Option<String>,
}

impl GcReport {
    /// Whether content was destroyed, so the backend's on-disk purge must follow.
    pub(crate) fn purged_content(&self) -> bool {
        self.purged_events > 0
            || self.purged_pending > 0
            || self.purged_reads > 0
            || self.blanked_sources > 0
            || self.blanked_copies > 0
    }
}

/// `days` before `now`; a period reaching past the year 1 (a setting of millions of years, which
/// a raw client may have stored) is the year 1 — before anything memscope stores, so nothing is
/// old enough — rather than an overflow.
fn days_before(now: DateTime<Utc>, days: i64) -> DateTime<Utc> {
    let floor = DateTime::<Utc>::from_timestamp(-62_135_596_800, 0).unwrap_or(now);
    Duration::try_days(days)
        .and_then(|d| now.checked_sub_signed(d))
        .map_or(floor, |t| t.max(floor))
}

/// What a `gc` run does: its two periods in days and the settings it saves.
#[derive(Debug, Clone)]
pub(crate) struct GcPlan {
    pub(crate) retention_days: i64,
    pub(crate) tombstone_safe_days: i64,
    /// (key, days) the run saves in `settings`: the periods it was given.
    pub(crate) saved: Vec<(&'static str, String)>,
}

impl GcPlan {
    /// The periods given on the command line, else `stored(key)` (the saved setting), else the
    /// default `settings` shows; a negative period is refused.
    pub(crate) fn new(
        retention: Option<i64>,
        tombstone_safe: Option<i64>,
        mut stored: impl FnMut(&str) -> Result<Option<String>>,
    ) -> Result<GcPlan> {
        let mut saved = Vec::new();
        let mut days = |key: &'static str, given: Option<i64>| -> Result<i64> {
            match given {
                // The caller's mistake, as a setting's bad value is (the CLI's usage error).
                Some(d) if d < 0 => Err(InvalidRequest(format!(
                    "{key} must be 0 or more days, got {d}"
                )))?,
                Some(d) if d > MAX_GC_DAYS => Err(InvalidRequest(format!(
                    "{key} must be at most {MAX_GC_DAYS} days, got {d}"
                )))?,
                Some(d) => {
                    saved.push((key, d.to_string()));
                    Ok(d)
                }
                // A missing row is the default `settings` shows (30 days for tombstones), not
                // 0 — which turns collection off (found by review: a dump without the row).
                None => {
                    let shown = crate::store::user_settings::shown_user_setting(key, stored(key)?);
                    if let Some(problem) =
                        crate::store::user_settings::stored_setting_problem(key, &shown)
                    {
                        bail!(
                            "{problem} (or pass --{} N), then run gc again; nothing was collected",
                            key.replace('_', "-")
                        );
                    }
                    Ok(shown.parse()?)
                }
            }
        };
        let retention_days = days(RETENTION_KEY, retention)?;
        let tombstone_safe_days = days(TOMBSTONE_SAFE_KEY, tombstone_safe)?;
        Ok(GcPlan {
            retention_days,
            tombstone_safe_days,
            saved,
        })
    }

    /// Content older than this is purged (superseded versions, stale and confirmed events,
    /// closed pending items, logged reads); `None`: retention keeps everything.
    pub(crate) fn retention_cutoff(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (self.retention_days > 0).then(|| days_before(now, self.retention_days))
    }

    /// Tombstones older than this may be collected; `None`: none is.
    pub(crate) fn tombstone_cutoff(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (self.tombstone_safe_days > 0).then(|| days_before(now, self.tombstone_safe_days))
    }

    /// The report, before anything is counted.
    pub(crate) fn report(&self) -> GcReport {
        GcReport {
            retention_days: self.retention_days,
            tombstone_safe_days: self.tombstone_safe_days,
            ..Default::default()
        }
    }
}

/// The latest confirmation of the current record's version, a condition on a `history` row:
/// its source is the record's `confirmed_source`.
macro_rules! latest_confirmation {
    () => {
        "(event = 'confirmed'
          AND EXISTS (SELECT 1 FROM memories m WHERE m.subject = history.subject
                      AND m.predicate = history.predicate AND m.scope = history.scope
                      AND m.version = history.version)
          AND NOT EXISTS (SELECT 1 FROM history c WHERE c.subject = history.subject
                          AND c.predicate = history.predicate AND c.scope = history.scope
                          AND c.event = 'confirmed' AND c.version = history.version
                          AND c.id > history.id))"
    };
}

/// Retention's purge of history (`$1` the cutoff), the same on every backend: the value, raw
/// words and source of every event older than the cutoff — but not the current record's own
/// `set` event, nor the source of its latest confirmation: the live memory's provenance, which
/// the record repeats (README, "check": current view = history). The event rows stay; a row
/// with nothing left to blank is not touched (nor counted).
pub(crate) const RETENTION_PURGE_SQL: &str = concat!(
    "UPDATE history SET value = NULL, raw = NULL,
            source = CASE WHEN ",
    latest_confirmation!(),
    " THEN source END
     WHERE at < $1
       AND (value IS NOT NULL OR raw IS NOT NULL OR (source IS NOT NULL AND NOT ",
    latest_confirmation!(),
    "))
       AND NOT (event = 'set' AND EXISTS (SELECT 1 FROM memories m WHERE m.subject = history.subject
                AND m.predicate = history.predicate AND m.scope = history.scope
                AND m.version = history.version))"
);

/// Whether a tombstone older than the cutoff may go: only when its identity holds nothing —
/// no history event with content and no live record — so lifting the guard cannot let a
/// write bring deleted content back beside what is still there.
pub(crate) fn tombstone_collectable(history_holds_content: bool, live_record: bool) -> bool {
    !history_holds_content && !live_record
}
