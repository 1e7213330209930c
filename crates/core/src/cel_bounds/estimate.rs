//! The cost estimate made at load: an upper bound on the cost units one
//! evaluation of a tree can spend, given the [`ValueBound`]s of its variables —
//! the caps on the views' collections, the exact sizes of `params`, or an
//! assumed size for what nobody bounds. A node costs one unit; a
//! comprehension costs its range, its start and, for each element the
//! range can hold, its condition and step; a `+` that builds a string or a
//! list costs the most entries or bytes it can build (as the run-time meter
//! charges it). Recursive: call only on a tree [`super::limits::check_tree`] has
//! measured.

use std::collections::BTreeMap;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, LiteralValue};
use cel::parser::Expression;

use super::meter::append_step_guarded;
use super::walk::children;
use super::{MAX_BUILT_LIST, MAX_BUILT_STRING, STRING_BYTES_PER_UNIT};

/// What is known of the values an expression can see or build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValueBound {
    /// The most entries (a list or map) or bytes (a string) it can have.
    pub len: u64,
    /// A number, bool or null: nothing to iterate, nothing to copy.
    pub scalar: bool,
    /// A string (or bytes): `len` counts bytes, built at
    /// [`STRING_BYTES_PER_UNIT`] bytes per unit.
    pub text: bool,
    /// The shape of each entry (list element, map value); `None`: unknown.
    pub item: Option<Box<ValueBound>>,
    /// The fields of an object whose fields are known (a view, `params`).
    pub fields: Option<BTreeMap<String, ValueBound>>,
}

impl ValueBound {
    /// A number, bool or null.
    pub fn scalar() -> ValueBound {
        ValueBound {
            scalar: true,
            ..ValueBound::default()
        }
    }

    /// A string of at most `bytes` bytes.
    pub fn string(bytes: u64) -> ValueBound {
        ValueBound {
            len: bytes,
            text: true,
            ..ValueBound::default()
        }
    }

    /// A list or map of at most `len` entries shaped `item`.
    pub fn collection(len: u64, item: ValueBound) -> ValueBound {
        ValueBound {
            len,
            item: Some(Box::new(item)),
            ..ValueBound::default()
        }
    }

    /// An object with these fields.
    pub fn object(fields: impl IntoIterator<Item = (String, ValueBound)>) -> ValueBound {
        let fields: BTreeMap<String, ValueBound> = fields.into_iter().collect();
        ValueBound {
            len: fields.len() as u64,
            fields: Some(fields),
            ..ValueBound::default()
        }
    }

    /// The exact shape of a JSON value (a policy's `params`).
    pub fn of_json(value: &serde_json::Value) -> ValueBound {
        use serde_json::Value as Json;
        match value {
            Json::Null | Json::Bool(_) | Json::Number(_) => ValueBound::scalar(),
            Json::String(s) => ValueBound::string(s.len() as u64),
            Json::Array(items) => {
                let item = items
                    .iter()
                    .map(ValueBound::of_json)
                    .reduce(|a, b| a.merge(&b))
                    .unwrap_or_else(ValueBound::scalar);
                ValueBound::collection(items.len() as u64, item)
            }
            Json::Object(fields) => ValueBound::object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), ValueBound::of_json(v))),
            ),
        }
    }

    /// A bound that covers both.
    pub fn merge(&self, other: &ValueBound) -> ValueBound {
        let item = match (&self.item, &other.item) {
            (Some(a), Some(b)) => Some(Box::new(a.merge(b))),
            (Some(a), None) if other.scalar => Some(a.clone()),
            (None, Some(b)) if self.scalar => Some(b.clone()),
            _ => None,
        };
        let fields = match (&self.fields, &other.fields) {
            (Some(a), Some(b)) => {
                let mut merged = a.clone();
                for (k, v) in b {
                    let m = merged.get(k).map_or_else(|| v.clone(), |old| old.merge(v));
                    merged.insert(k.clone(), m);
                }
                Some(merged)
            }
            (Some(a), None) if other.scalar => Some(a.clone()),
            (None, Some(b)) if self.scalar => Some(b.clone()),
            _ => None,
        };
        ValueBound {
            len: self.len.max(other.len),
            scalar: self.scalar && other.scalar,
            text: (self.text || self.scalar) && (other.text || other.scalar),
            item,
            fields,
        }
    }

    /// How many times a comprehension over it can iterate.
    fn entries(&self) -> u64 {
        match &self.fields {
            Some(fields) => fields.len() as u64,
            None => self.len,
        }
    }

    /// The shape of one of its entries.
    fn entry(&self, unknown: &ValueBound) -> ValueBound {
        if let Some(item) = &self.item {
            return (**item).clone();
        }
        match &self.fields {
            Some(fields) => fields
                .values()
                .cloned()
                .reduce(|a, b| a.merge(&b))
                .unwrap_or_else(ValueBound::scalar),
            None => unknown.clone(),
        }
    }

    fn field(&self, name: &str, unknown: &ValueBound) -> ValueBound {
        match &self.fields {
            Some(fields) => fields.get(name).cloned().unwrap_or_else(|| unknown.clone()),
            None => self.entry(unknown),
        }
    }
}

/// Most cost units one evaluation of `root` can spend. `variable` gives the
/// shape of a variable by name (`None`: unknown); an unknown value is taken
/// to hold at most `unknown_len` entries or bytes, each unknown too.
pub fn estimate(
    root: &Expression,
    variable: &dyn Fn(&str) -> Option<ValueBound>,
    unknown_len: u64,
) -> u64 {
    let estimator = Estimator {
        variable,
        unknown: ValueBound {
            len: unknown_len,
            ..ValueBound::default()
        },
    };
    estimator.node(root, &mut Vec::new()).0
}

struct Estimator<'a> {
    variable: &'a dyn Fn(&str) -> Option<ValueBound>,
    unknown: ValueBound,
}

/// The most a `+` can build.
const BUILT_CAP: u64 = if MAX_BUILT_STRING > MAX_BUILT_LIST {
    MAX_BUILT_STRING as u64
} else {
    MAX_BUILT_LIST as u64
};

impl Estimator<'_> {
    fn node(&self, node: &Expression, scope: &mut Vec<(String, ValueBound)>) -> (u64, ValueBound) {
        match &node.expr {
            Expr::Literal(LiteralValue::String(s)) => {
                (1, ValueBound::string(s.inner().len() as u64))
            }
            Expr::Literal(LiteralValue::Bytes(b)) => {
                (1, ValueBound::string(b.inner().len() as u64))
            }
            Expr::Literal(_) => (1, ValueBound::scalar()),
            Expr::Ident(name) => (1, self.ident(name, scope)),
            Expr::Select(select) => {
                let (cost, operand) = self.node(&select.operand, scope);
                let shape = if select.test {
                    ValueBound::scalar()
                } else {
                    operand.field(&select.field, &self.unknown)
                };
                (cost.saturating_add(1), shape)
            }
            Expr::List(list) => {
                let (cost, item) = self.all(list.elements.iter(), scope);
                (
                    cost,
                    ValueBound::collection(list.elements.len() as u64, item),
                )
            }
            Expr::Map(map) => {
                let mut cost = 1u64;
                let mut fields = BTreeMap::new();
                let mut item: Option<ValueBound> = None;
                let mut known = true;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(e) = &entry.expr else {
                        continue;
                    };
                    let (kc, _) = self.node(&e.key, scope);
                    let (vc, value) = self.node(&e.value, scope);
                    cost = cost.saturating_add(kc).saturating_add(vc);
                    item = Some(item.map_or_else(|| value.clone(), |i| i.merge(&value)));
                    match &e.key.expr {
                        Expr::Literal(LiteralValue::String(k)) => {
                            fields.insert(k.inner().to_string(), value);
                        }
                        _ => known = false,
                    }
                }
                let shape = if known {
                    ValueBound::object(fields)
                } else {
                    ValueBound::collection(map.entries.len() as u64, item.unwrap_or_default())
                };
                (cost, shape)
            }
            Expr::Call(call) => {
                let mut cost = 1u64;
                let mut shapes = Vec::new();
                for arg in call.target.as_deref().into_iter().chain(call.args.iter()) {
                    let (c, s) = self.node(arg, scope);
                    cost = cost.saturating_add(c);
                    shapes.push(s);
                }
                let (extra, shape) = self.call(&call.func_name, &call.args, &shapes);
                (cost.saturating_add(extra), shape)
            }
            Expr::Comprehension(c) => self.comprehension(c, scope),
            Expr::Struct(_) | Expr::Unspecified => {
                let (cost, _) = self.all(children(&node.expr).into_iter(), scope);
                (cost, self.unknown.clone())
            }
        }
    }

    fn all<'e>(
        &self,
        nodes: impl Iterator<Item = &'e Expression>,
        scope: &mut Vec<(String, ValueBound)>,
    ) -> (u64, ValueBound) {
        let mut cost = 1u64;
        let mut merged: Option<ValueBound> = None;
        for node in nodes {
            let (c, s) = self.node(node, scope);
            cost = cost.saturating_add(c);
            merged = Some(merged.map_or_else(|| s.clone(), |m| m.merge(&s)));
        }
        (cost, merged.unwrap_or_else(ValueBound::scalar))
    }

    fn ident(&self, name: &str, scope: &[(String, ValueBound)]) -> ValueBound {
        if let Some((_, shape)) = scope.iter().rev().find(|(n, _)| n == name) {
            return shape.clone();
        }
        let name = name.strip_prefix('.').unwrap_or(name);
        let mut path = name.split('.');
        let root = path.next().unwrap_or(name);
        let Some(mut shape) = (self.variable)(root) else {
            return self.unknown.clone();
        };
        for field in path {
            shape = shape.field(field, &self.unknown);
        }
        shape
    }

    /// The extra cost and the result of a call on arguments shaped `args`
    /// (the target first).
    fn call(&self, name: &str, exprs: &[Expression], args: &[ValueBound]) -> (u64, ValueBound) {
        let bytes = |s: &ValueBound| s.len / STRING_BYTES_PER_UNIT;
        let first = || args.first().cloned().unwrap_or_else(ValueBound::scalar);
        match (name, args) {
            ("_+_", [a, b]) => {
                let shape = ValueBound {
                    len: a.len.saturating_add(b.len).min(BUILT_CAP),
                    ..a.merge(b)
                };
                let extra = match (shape.scalar, shape.text) {
                    (true, _) => 0,
                    (false, true) => shape.len / STRING_BYTES_PER_UNIT + 1,
                    (false, false) => shape.len,
                };
                (extra, shape)
            }
            ("_[_]" | "_[?_]", [operand, _]) => {
                let shape = match exprs.get(1).map(|e| &e.expr) {
                    Some(Expr::Literal(LiteralValue::String(key))) => {
                        operand.field(key.inner(), &self.unknown)
                    }
                    _ => operand.entry(&self.unknown),
                };
                (0, shape)
            }
            ("_?_:_", [_, a, b]) => (0, a.merge(b)),
            ("@in", [_, collection]) => (collection.entries(), ValueBound::scalar()),
            ("_==_" | "_!=_" | "contains" | "startsWith" | "endsWith" | "matches", [a, b]) => {
                (bytes(a).saturating_add(bytes(b)), ValueBound::scalar())
            }
            ("string", [a]) if a.scalar => (0, ValueBound::string(32)),
            ("string" | "lowerAscii" | "upperAscii" | "trim" | "dyn" | "optional.of", [a]) => {
                (bytes(a), a.clone())
            }
            (
                "_&&_"
                | "_||_"
                | "!_"
                | "-_"
                | "_-_"
                | "_*_"
                | "_/_"
                | "_%_"
                | "_<_"
                | "_<=_"
                | "_>_"
                | "_>=_"
                | "size"
                | "int"
                | "uint"
                | "double"
                | "bool"
                | "type"
                | "@not_strictly_false"
                | "hasValue"
                | "quantity",
                _,
            ) => (0, ValueBound::scalar()),
            _ => (
                0,
                args.iter()
                    .cloned()
                    .reduce(|a, b| a.merge(&b))
                    .unwrap_or_else(first),
            ),
        }
    }

    fn comprehension(
        &self,
        c: &ComprehensionExpr,
        scope: &mut Vec<(String, ValueBound)>,
    ) -> (u64, ValueBound) {
        let (range_cost, range) = self.node(&c.iter_range, scope);
        let (init_cost, init) = self.node(&c.accu_init, scope);
        let n = range.entries();
        let outer = scope.len();
        match &c.iter_var2 {
            Some(second) => {
                scope.push((c.iter_var.clone(), ValueBound::string(self.unknown.len)));
                scope.push((second.clone(), range.entry(&self.unknown)));
            }
            None => scope.push((c.iter_var.clone(), range.entry(&self.unknown))),
        }
        let body = |scope: &mut Vec<(String, ValueBound)>, accu: &ValueBound| {
            scope.push((c.accu_var.clone(), accu.clone()));
            let (cond, _) = self.node(&c.loop_cond, scope);
            let (step_cost, step) = self.node(&c.loop_step, scope);
            scope.pop();
            (cond.saturating_add(step_cost), step)
        };
        let (first_cost, step) = body(scope, &init);
        let (per_iteration, accu) = if append_step_guarded(c).is_some() {
            // built in place: each step appends one element
            let accu = ValueBound::collection(n.min(BUILT_CAP), step.entry(&self.unknown));
            (first_cost, accu)
        } else {
            let accu = ValueBound {
                len: init
                    .len
                    .saturating_add(n.saturating_mul(step.len.max(1)))
                    .min(BUILT_CAP),
                ..init.merge(&step)
            };
            (body(scope, &accu).0, accu)
        };
        scope.push((c.accu_var.clone(), accu));
        let (result_cost, result) = self.node(&c.result, scope);
        scope.truncate(outer);
        let cost = range_cost
            .saturating_add(init_cost)
            .saturating_add(n.saturating_mul(per_iteration))
            .saturating_add(result_cost)
            .saturating_add(1);
        (cost, result)
    }
}
