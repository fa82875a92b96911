//! The settings a user may change (`memscope settings`), validated here so that every front end
//! and every backend refuses the same values. The rows live in the `settings` table
//! (docs/SCHEMA.md).

use crate::store::guard::GuardMode;
use anyhow::{bail, Result};
use serde::Serialize;

/// The `settings` key of [`Durability`].
pub const DURABILITY_KEY: &str = "durability";

/// When a commit reaches the disk. See the README's "Durability".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// The WAL is synced at every commit: a write memscope acknowledged survives a power
    /// loss or an OS crash. The default.
    Full,
    /// The WAL is synced at checkpoints only: after a power loss the file is consistent, but
    /// the last acknowledged writes may be gone.
    Normal,
}

impl Durability {
    /// The level a stored setting names; anything but `normal` (or no row) is `full`.
    pub fn from_setting(value: Option<&str>) -> Durability {
        match value {
            Some(v) if v.trim().eq_ignore_ascii_case("normal") => Durability::Normal,
            _ => Durability::Full,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
        }
    }

    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }
}

/// The settings `memscope settings set` may change, with what each takes.
/// The scope guard's setting (README, "The scope guard"): `queue` (the default), `flag`, `off`.
pub const SCOPE_GUARD_KEY: &str = "scope_guard";

/// The guard mode a stored setting names; anything else (or none) is the default, `queue`.
pub(crate) fn scope_guard_of(value: Option<&str>) -> GuardMode {
    value.and_then(GuardMode::parse).unwrap_or(GuardMode::Queue)
}

pub const USER_SETTINGS: [(&str, &str); 4] = [
    (DURABILITY_KEY, "full or normal"),
    (
        SCOPE_GUARD_KEY,
        "queue, flag or off: what a global write whose words point at one place comes to",
    ),
    (
        "retention_days",
        "a whole number of days, 0 = keep history forever",
    ),
    ("tombstone_safe_days", "a whole number of days"),
];

/// `value` checked for the user setting `key`, as it is stored; a refusal is the caller's
/// mistake ([`crate::model::InvalidRequest`]: the CLI's usage error).
pub(crate) fn checked_user_setting(key: &str, value: &str) -> Result<String> {
    checked(key, value.trim()).map_err(|e| crate::model::InvalidRequest(format!("{e:#}")).into())
}

fn checked(key: &str, value: &str) -> Result<String> {
    Ok(match key {
        DURABILITY_KEY => match value.to_ascii_lowercase().as_str() {
            "full" => Durability::Full.as_str().to_string(),
            "normal" => Durability::Normal.as_str().to_string(),
            _ => bail!(
                "durability must be full or normal, got {}: full syncs every commit, normal only at checkpoints",
                said(value)
            ),
        },
        SCOPE_GUARD_KEY => match GuardMode::parse(&value.to_ascii_lowercase()) {
            Some(mode) => mode.as_str().to_string(),
            None => bail!(
                "scope_guard must be queue, flag or off, got {}: queue asks a human, flag applies and marks, off trusts the writer",
                said(value)
            ),
        },
        "retention_days" | "tombstone_safe_days" => match value.parse::<u32>() {
            Ok(n) => n.to_string(),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => bail!(
                "{key} must be at most {} days, got {}",
                u32::MAX,
                said(value)
            ),
            // Said as `gc --retention-days -1` says it.
            Err(_) if value.parse::<i128>().is_ok_and(|n| n < 0) => {
                bail!("{key} must be 0 or more days, got {}", said(value))
            }
            Err(_) => bail!(
                "{key} must be a whole number of days, got {}",
                said(value)
            ),
        },
        other => bail!(
            "unknown setting {}: memscope has {}",
            said(other),
            USER_SETTINGS
                .iter()
                .map(|(k, what)| format!("{k} ({what})"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// What the user gave, quoted as a JSON string and escaped — cut to 40 characters inside the
/// quotes, so they always close.
fn said(value: &str) -> String {
    crate::model::to_json(&crate::model::shorten(value, 40)).unwrap_or_default()
}

/// A user setting's value as shown: the stored one as it is (a value memscope cannot read
/// included: [`stored_setting_problem`] says what is wrong with it), or its default.
pub(crate) fn shown_user_setting(key: &str, stored: Option<String>) -> String {
    match (key, stored) {
        (_, Some(v)) => v,
        (DURABILITY_KEY, None) => Durability::Full.as_str().to_string(),
        (SCOPE_GUARD_KEY, None) => GuardMode::Queue.as_str().to_string(),
        ("retention_days", None) => "0".into(),
        (_, None) => "30".into(),
    }
}

/// What is wrong with a user setting's stored value, or `None`: memscope writes each in one
/// form (`settings set`), and a value in any other — a raw client's, a damaged row's — is read
/// as the default (the durability, the guard mode) or not at all (a day count). `settings`
/// names it and `gc` refuses to run by it (found by review: `settings` showed `queue` for a
/// stored `maybe`, and `gc` ran with retention off for a stored `abc`). `check` holds every
/// setting to the same kind of rule (`store::fields`).
pub fn stored_setting_problem(key: &str, stored: &str) -> Option<String> {
    let fix = format!("set it again with `memscope settings set {key} VALUE`");
    match checked(key, stored) {
        Ok(v) if v == stored => None,
        Ok(v) => Some(format!(
            "the setting {key} holds {}, not in the form memscope writes ({}): {fix}",
            said(stored),
            said(&v)
        )),
        Err(e) => Some(format!("the setting {key} cannot be read ({e:#}): {fix}")),
    }
}
