//! JSON as CEL values, the one conversion the job integrations (a job
//! version, borrowed for its evaluations) and the policies (a policy's
//! `config`, kept as its `params`) share: integers as `int` (else `uint`,
//! as Kubernetes' own CEL does, so `object.spec.replicas * 2` needs no
//! casts), other numbers as `double`.

use std::collections::HashMap;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde_json::Value;

/// `value` as a CEL value that borrows its strings.
pub fn borrowed(value: &Value) -> Box<dyn Val + '_> {
    convert::<Borrow>(value)
}

/// `value` as a CEL value of its own, to keep.
pub fn owned(value: &Value) -> Box<dyn Val> {
    convert::<Own>(value)
}

/// How the conversion makes a CEL string of a JSON one.
trait Strings<'a, 'v> {
    fn string(text: &'a str) -> CelString<'v>;
    fn key(text: &'a str) -> CelMapKey<'v>;
}

struct Borrow;

impl<'a> Strings<'a, 'a> for Borrow {
    fn string(text: &'a str) -> CelString<'a> {
        CelString::from(text)
    }
    fn key(text: &'a str) -> CelMapKey<'a> {
        CelMapKey::from(text)
    }
}

struct Own;

impl<'a> Strings<'a, 'static> for Own {
    fn string(text: &'a str) -> CelString<'static> {
        CelString::from(text.to_string())
    }
    fn key(text: &'a str) -> CelMapKey<'static> {
        CelMapKey::from(text.to_string())
    }
}

fn convert<'a, 'v, S: Strings<'a, 'v>>(value: &'a Value) -> Box<dyn Val + 'v> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(int), _, _) => Box::new(CelInt::from(int)),
            (None, Some(uint), _) => Box::new(CelUInt::from(uint)),
            (None, None, Some(float)) => Box::new(CelDouble::from(float)),
            (None, None, None) => Box::new(CelNull),
        },
        Value::String(text) => Box::new(S::string(text)),
        Value::Array(items) => Box::new(CelList::from(
            items.iter().map(convert::<S>).collect::<Vec<_>>(),
        )),
        Value::Object(fields) => Box::new(CelMap::from(
            fields
                .iter()
                .map(|(k, v)| (S::key(k), convert::<S>(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}
