//! Named settings a user may change (`memscope settings`), validated here so that every front
//! end refuses the same values. The rows live in the `settings` table (docs/SCHEMA.md).

use super::Store;
pub(crate) use crate::store::user_settings::{
    checked_user_setting, scope_guard_of, shown_user_setting,
};
pub use crate::store::user_settings::{Durability, DURABILITY_KEY, SCOPE_GUARD_KEY, USER_SETTINGS};
use anyhow::Result;

impl Store {
    /// The user settings and their values (defaults where no row exists).
    pub fn user_settings(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (key, _) in USER_SETTINGS {
            out.push((key.to_string(), shown_user_setting(key, self.setting(key)?)));
        }
        Ok(out)
    }

    /// Sets a user setting after checking its value; returns the value as stored. A change of
    /// durability applies to this connection at once and to every other one when it opens.
    pub fn set_user_setting(&mut self, key: &str, value: &str) -> Result<String> {
        let stored = checked_user_setting(key, value)?;
        self.set_setting(key, &stored)?;
        if key == DURABILITY_KEY {
            self.apply_durability()?;
        }
        Ok(stored)
    }
}
