//! Walking a parsed CEL expression: the children of a node, read-only and
//! mutable, in evaluation order. Shared by the policy compiler and the job
//! integrations; only call recursive walks on a tree [`super::check_tree`]
//! has measured as shallow.

use cel::common::ast::{EntryExpr, Expr};
use cel::parser::Expression;

/// The children of a node, in evaluation order.
pub fn children(expr: &Expr) -> Vec<&Expression> {
    match expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(call.args.iter())
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|e| match &e.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .map(|e| match &e.expr {
                EntryExpr::MapEntry(m) => &m.value,
                EntryExpr::StructField(f) => &f.value,
            })
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// Calls `f` on each direct child of `node`.
pub fn children_mut(node: &mut Expression, mut f: impl FnMut(&mut Expression)) {
    match &mut node.expr {
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                f(target);
            }
            call.args.iter_mut().for_each(&mut f);
        }
        Expr::Comprehension(c) => {
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                f(e);
            }
        }
        Expr::List(list) => list.elements.iter_mut().for_each(&mut f),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(m) => {
                        f(&mut m.key);
                        f(&mut m.value);
                    }
                    EntryExpr::StructField(field) => f(&mut field.value),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(m) => f(&mut m.value),
                    EntryExpr::StructField(field) => f(&mut field.value),
                }
            }
        }
        Expr::Select(select) => f(&mut select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}
