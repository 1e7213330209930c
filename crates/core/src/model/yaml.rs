//! One YAML document into a JSON value, as `serde_json::Value`'s own
//! deserializer would make it, except that a mapping naming the same key
//! twice is an error: YAML says keys are unique, and silently keeping the
//! last of two `nominalQuota`s hides a mistake; and a `.nan` or `.inf` is
//! an error, where serde_json would make it null and so "not given" (a
//! weight of `.nan` silently became the default). Pure; used by `load` and
//! the bundle loader.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value read from YAML with unique mapping keys.
pub struct UniqueKeys(pub Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor).map(UniqueKeys)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // A NaN or an infinity has no JSON number; serde_json would make it
        // null, which reads as "not given" and silently takes the default.
        Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            E::custom(format_args!(
                "{} is not a finite number; give a finite number (or quote it if a string is meant)",
                yaml_name(v)
            ))
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        UniqueKeys::deserialize(d).map(|v| v.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let UniqueKeys(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{key}` appears twice in one mapping; keep one"
                )));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// How YAML spells a non-finite float.
fn yaml_name(v: f64) -> &'static str {
    if v.is_nan() {
        ".nan"
    } else if v > 0.0 {
        ".inf"
    } else {
        "-.inf"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, String> {
        serde_yaml_ng::from_str::<UniqueKeys>(text)
            .map(|v| v.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn values_read_as_serde_json_reads_them() {
        let text = "a: 1\nb: [true, null, 2.5, -3, x]\nc: {d: ''}\n";
        let plain: Value = serde_yaml_ng::from_str(text).unwrap_or_default();
        assert_eq!(read(text), Ok(plain));
    }

    #[test]
    fn a_key_named_twice_is_an_error_with_its_place() {
        let err = read("spec:\n  nominalQuota: 4\n  nominalQuota: 8\n")
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("the key `nominalQuota` appears twice"),
            "{err}"
        );
        assert!(err.contains("spec: ") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn a_nan_or_an_infinity_is_an_error_with_its_place() {
        for (text, shown) in [
            (".nan", ".nan"),
            (".inf", ".inf"),
            ("-.Inf", "-.inf"),
            (".NaN", ".nan"),
        ] {
            let err = read(&format!("spec:\n  fairSharing:\n    weight: {text}\n"))
                .err()
                .unwrap_or_default();
            assert!(
                err.contains(&format!("{shown} is not a finite number")),
                "{text}: {err}"
            );
            assert!(
                err.contains("spec.fairSharing.weight") && err.contains("line 3"),
                "{err}"
            );
        }
        assert_eq!(
            read("weight: '.nan'"),
            Ok(serde_json::json!({"weight": ".nan"}))
        );
    }
}
