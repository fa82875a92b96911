//! The VACUUM after a purge (README, "Running on PostgreSQL"), shared by `delete` and `gc`:
//! the touched tables' dead row versions marked free for reuse, the index pass forced (a plain
//! VACUUM skips it when few pages changed).

use postgres::Client;

/// VACUUMs `tables` (memscope's own names, never a user's text) when the current role may —
/// only their owner (or a superuser) may before PostgreSQL 17; for anyone else PostgreSQL skips
/// them with a warning, so ask first. Whether it ran.
pub(super) fn after_purge(client: &mut Client, tables: &[&str]) -> bool {
    let names: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
    let may_vacuum: bool = client
        .query_one(
            "SELECT coalesce(bool_and(pg_has_role(current_user, c.relowner, 'USAGE')), false)
             FROM pg_class c WHERE c.oid = ANY($1::text[]::regclass[])",
            &[&names],
        )
        .map(|r| r.get(0))
        .unwrap_or(false);
    may_vacuum
        && client
            .batch_execute(&format!("VACUUM (INDEX_CLEANUP ON) {}", tables.join(", ")))
            .is_ok()
}
