//! `suspects`: current global records that look like the rule of one place (README,
//! "suspects"), with their evidence, blast radius and the suggested rescope.

use super::{outln, print_json, EXIT_OK};
use crate::model::{shorten, value_text};
use crate::store::AnyStore;
use anyhow::Result;

pub fn run(store: &mut AnyStore, json: bool) -> Result<i32> {
    let found = store.suspects()?;
    if json {
        print_json(&found)?;
        return Ok(EXIT_OK);
    }
    if found.is_empty() {
        outln!("no suspects: no global record's words or message point at one place");
    }
    for s in &found {
        let r = &s.record;
        outln!(
            "{} · {} @ global = {}  v{}  {}",
            r.subject,
            r.predicate,
            shorten(&value_text(&r.value), 60),
            r.version,
            r.source
        );
        if let Some(raw) = &r.raw {
            let why = s.evidence.join("; ");
            outln!("    “{}”", crate::model::excerpt_with_cue(raw, &why, 100));
        }
        for e in &s.evidence {
            outln!("    • {e}");
        }
        let n = s.blast_radius.len();
        if n > 0 {
            let shown: Vec<&str> = s.blast_radius.iter().take(5).map(String::as_str).collect();
            let more = if n > 5 {
                format!(" and {} more", n - 5)
            } else {
                String::new()
            };
            outln!(
                "    served to {n} repositor{} without a rule of {} own: {}{more}",
                if n == 1 { "y" } else { "ies" },
                if n == 1 { "its" } else { "their" },
                shown.join(", ")
            );
        }
        if s.reads > 0 {
            outln!("    {} logged read(s) got this global value", s.reads);
        }
        // Where the evidence names no place (the words say only "this repo", written without
        // a context), the fix is the same command with the place the person knows (found by an
        // exploratory test: no `fix:` line, no next step).
        let to = match &s.suggested_scope {
            Some(to) => crate::model::shell_word(&to.to_string()),
            None => "repo:ID".to_string(),
        };
        outln!(
            "    fix: memscope rescope --subject {} --predicate {} --scope global --to {to}{}",
            crate::model::shell_word(&r.subject),
            crate::model::shell_word(&r.predicate),
            if s.suggested_scope.is_none() {
                "   (the words name no place: put the repository or task it belongs to, repo:ID or task:ID)"
            } else {
                ""
            }
        );
    }
    Ok(EXIT_OK)
}
