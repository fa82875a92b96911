//! How the command line reads a number — the same for every one it takes.

use clap::builder::{StringValueParser, TypedValueParser};
use std::ffi::OsStr;
use std::fmt;
use std::num::IntErrorKind;

/// A value an argument refused, as the one sentence the user reads: the argument, what it takes,
/// what was typed. [`super::usage_failure`] prints it in place of clap's "invalid value … for …".
#[derive(Debug)]
pub struct ValueRefused(String);

impl fmt::Display for ValueRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueRefused {}

/// A whole-number argument: what is no whole number is refused naming the argument and what it
/// takes (`--causal-seq must be a whole number from `memscope seq`, got 'abc'`), never as
/// clap's "invalid digit found in string". Each such argument allows negative numbers, so a
/// negative one reaches the rule of its command (or `at_least`) instead of being taken for a flag.
#[derive(Debug, Clone, Copy)]
pub struct WholeNumber {
    /// What the argument takes, said after "must be".
    takes: &'static str,
    /// The smallest it takes, when no rule of the command says it.
    least: Option<i64>,
    /// The largest it takes, likewise.
    most: Option<i64>,
    /// How a positional argument is named (a flag is named by itself).
    name: Option<&'static str>,
}

impl WholeNumber {
    pub const fn new(takes: &'static str) -> WholeNumber {
        WholeNumber {
            takes,
            least: None,
            most: None,
            name: None,
        }
    }

    pub const fn at_least(self, least: i64) -> WholeNumber {
        WholeNumber {
            least: Some(least),
            ..self
        }
    }

    pub const fn at_most(self, most: i64) -> WholeNumber {
        WholeNumber {
            most: Some(most),
            ..self
        }
    }

    pub const fn named(self, name: &'static str) -> WholeNumber {
        WholeNumber {
            name: Some(name),
            ..self
        }
    }

    /// Reads `typed` as the argument `name`.
    fn read(&self, name: &str, typed: &str) -> Result<i64, ValueRefused> {
        let shown = crate::model::shorten(typed, 60);
        let refused =
            |what: &str| ValueRefused(format!("{name} {what} {}, got '{shown}'", self.takes));
        match typed.trim().parse::<i64>() {
            Ok(n) if self.least.is_some_and(|least| n < least) => Err(refused("must be")),
            Ok(n) if self.most.is_some_and(|most| n > most) => {
                Err(refused("is out of range: it must be"))
            }
            Ok(n) => Ok(n),
            Err(e)
                if matches!(
                    e.kind(),
                    IntErrorKind::PosOverflow | IntErrorKind::NegOverflow
                ) =>
            {
                Err(refused("is out of range: it must be"))
            }
            Err(_) => Err(refused("must be")),
        }
    }
}

impl TypedValueParser for WholeNumber {
    type Value = i64;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<i64, clap::Error> {
        let name = match (self.name, arg.and_then(|a| a.get_long())) {
            (Some(name), _) => name.to_string(),
            (None, Some(long)) => format!("--{long}"),
            (None, None) => arg.map_or("the number".into(), |a| a.get_id().to_string()),
        };
        let number = *self;
        // Through clap's own mapping, so that the refusal stays the error's source.
        StringValueParser::new()
            .try_map(move |typed| number.read(&name, &typed))
            .parse_ref(cmd, arg, value)
    }
}
