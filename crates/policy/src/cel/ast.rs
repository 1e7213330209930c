//! Walking a parsed expression: the children of a node (read-only and
//! mutable, in evaluation order), its identifiers, and which of the
//! [`VARIABLES`] it names. Used by `compiler`, `limits` and `params`; only
//! call the recursive walks on a tree `limits` has measured as shallow.
//! It never changes a tree itself: `children_mut` hands each child to the
//! caller's rewrite.

use cel::common::ast::Expr;
use cel::parser::Expression;

pub(super) use arbiter_core::cel_bounds::{children, children_mut};

use super::VARIABLES;

/// The [`VARIABLES`] an expression names (as bits), by the root of each
/// identifier (`workload` of a flattened `workload.gpus`). A comprehension
/// variable named like one counts too: an over-estimate, never an under-.
pub(super) fn variables_named(node: &Expression) -> u16 {
    let own = match &node.expr {
        Expr::Ident(name) => {
            let name = name.strip_prefix('.').unwrap_or(name);
            let root = name.split('.').next().unwrap_or(name);
            VARIABLES
                .iter()
                .position(|&v| v == root)
                .map_or(0, |i| 1u16 << i)
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
