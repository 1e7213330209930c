//! Walking a parsed expression: the children of a node (read-only and
//! mutable, in evaluation order), its identifiers, and which of the
//! [`VARIABLES`] it names. Used by `compiler`, `limits` and `params`; only
//! call the recursive walks on a tree `limits` has measured as shallow.
//! It never changes a tree itself: `children_mut` hands each child to the
//! caller's rewrite.

use cel::common::ast::{EntryExpr, Expr};
use cel::parser::Expression;

use super::VARIABLES;

/// The children of a node, in evaluation order.
pub(super) fn children(expr: &Expr) -> Vec<&Expression> {
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
pub(super) fn children_mut(node: &mut Expression, mut f: impl FnMut(&mut Expression)) {
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

/// The [`VARIABLES`] an expression names (as bits), by the root of each
/// identifier (`workload` of a flattened `workload.gpus`). A comprehension
/// variable named like one counts too: an over-estimate, never an under-.
pub(super) fn variables_named(node: &Expression) -> u8 {
    let own = match &node.expr {
        Expr::Ident(name) => {
            let name = name.strip_prefix('.').unwrap_or(name);
            let root = name.split('.').next().unwrap_or(name);
            VARIABLES
                .iter()
                .position(|&v| v == root)
                .map_or(0, |i| 1u8 << i)
        }
        _ => 0,
    };
    children(&node.expr)
        .into_iter()
        .fold(own, |bits, child| bits | variables_named(child))
}

pub(super) fn identifiers(node: &Expression, out: &mut Vec<String>) {
    if let Expr::Ident(name) = &node.expr {
        out.push(name.strip_prefix('.').unwrap_or(name).to_string());
    }
    for child in children(&node.expr) {
        identifiers(child, out);
    }
}
