//! JSON read as memscope keeps it: an object that names a key twice is refused, where
//! serde_json's `Value` silently keeps the last one. Found by review: `--value-json
//! '{"a":1,"a":2}'` stored `{"a":2}`, and an MCP call naming `predicate` twice wrote to the
//! second — a stored value must be the one that was sent, and a call whose meaning is in doubt
//! gets a sentence, not a guess (README, "write").
//!
//! Every place a client's JSON comes in reads it through here: `--value-json`, `apply`'s
//! values, and the MCP transport's messages (tool arguments included).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// A JSON value with every object's keys read once.
pub struct Strict(pub Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

/// For `#[serde(deserialize_with = …)]` on a `Value` field.
pub fn value<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Strict::deserialize(d).map(|s| s.0)
}

/// The start of the sentence a doubled key gets: callers match on it for their advice.
pub const DUPLICATE_KEY: &str = "an object names the key";

/// Whether `e` is the refusal of an object naming a key twice ([`DUPLICATE_KEY`]).
pub fn is_duplicate_key(e: &serde_json::Error) -> bool {
    e.to_string().starts_with(DUPLICATE_KEY)
}

/// Parses `text` as one JSON value (white space around it allowed), keys read once.
pub fn from_str(text: &str) -> serde_json::Result<Value> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        // As serde_json's own `Value`: a JSON number is always finite.
        Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        value(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "{DUPLICATE_KEY} {} twice",
                    crate::model::to_json(&crate::model::shorten(&key, 40)).unwrap_or_default()
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_serde_json_reads_and_refuses_a_key_twice() {
        for text in [
            "null",
            "true",
            "-0",
            "1.5e300",
            "18446744073709551615",
            "-9223372036854775808",
            r#""包 📦 \u001b""#,
            r#"[1, [2, {"a": {"b": []}}], {}]"#,
            r#"{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}"#,
        ] {
            let ours = from_str(text).unwrap();
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": 1, "a": 1}"#,
            r#"[{"x": {"k": 1, "k": [2]}}]"#,
            r#"{"值": 1, "\u503c": 2}"#,
        ] {
            let e = from_str(text).unwrap_err().to_string();
            assert!(e.contains(DUPLICATE_KEY), "{text}: {e}");
            // serde_json alone keeps the last.
            assert!(serde_json::from_str::<Value>(text).is_ok());
        }
    }
}
