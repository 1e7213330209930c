//! A policy's `params`: its `config` converted once at load into a CEL
//! value ([`Params`]), and its scalar fields folded into the program as
//! literals ([`fold_params`], called by `compiler`) so an evaluation does not look
//! them up. Called by the bundle loader; `resolve` hands [`Params`] to an
//! evaluation. Folding never changes a result or an error.

use cel::common::ast::{Expr, LiteralValue};
use cel::common::types::{CelBool, CelDouble, CelInt, CelString, CelUInt};
use cel::common::value::Val;
use cel::parser::Expression;

use super::ast::children_mut;

/// A policy's `config`, converted once at load into a CEL value.
#[derive(Debug)]
pub struct Params {
    pub(super) value: Box<dyn Val>,
}

impl Params {
    pub fn new(config: &serde_json::Value) -> Params {
        Params {
            value: arbiter_core::cel_json::owned(config),
        }
    }
}

/// Folds `params.<field>` into the literal of that field of the policy's
/// `config` where it is a scalar (params are constants of the policy), so an
/// evaluation does not look them up. The literal is the value `params`
/// would have resolved to at run time (`arbiter_core::cel_json::owned`): the result and its
/// errors are unchanged. Lists, maps, missing fields and `has(params.x)` are
/// left as they are, and so is anything inside a comprehension that binds a
/// variable named `params`.
pub(super) fn fold_params(
    node: &mut Expression,
    config: &serde_json::Map<String, serde_json::Value>,
) {
    match &node.expr {
        Expr::Select(select) if !select.test => {
            if let Expr::Ident(root) = &select.operand.expr {
                if root == "params" {
                    if let Some(literal) = config.get(&select.field).and_then(json_literal) {
                        node.expr = Expr::Literal(literal);
                    }
                    return;
                }
            }
        }
        Expr::Comprehension(c)
            if c.iter_var == "params"
                || c.accu_var == "params"
                || c.iter_var2.as_deref() == Some("params") =>
        {
            return
        }
        _ => {}
    }
    children_mut(node, |child| fold_params(child, config));
}

/// A scalar of `config` as the literal `arbiter_core::cel_json::owned` would make of it.
fn json_literal(value: &serde_json::Value) -> Option<LiteralValue> {
    use serde_json::Value as Json;
    Some(match value {
        Json::Null => LiteralValue::Null,
        Json::Bool(b) => LiteralValue::Boolean(CelBool::from(*b)),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(int), _, _) => LiteralValue::Int(CelInt::from(int)),
            (None, Some(uint), _) => LiteralValue::UInt(CelUInt::from(uint)),
            (None, None, Some(float)) => LiteralValue::Double(CelDouble::from(float)),
            (None, None, None) => LiteralValue::Null,
        },
        Json::String(text) => LiteralValue::String(CelString::from(text.clone())),
        Json::Array(_) | Json::Object(_) => return None,
    })
}
