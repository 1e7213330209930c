//! Compiling a policy expression, once, at bundle load: size and depth
//! limits first, then parsing (`arbiter_core::cel_bounds::parse`), refusing
//! unknown names, rewriting the tree — `has()` on optional view fields,
//! `view.field` flattened into one identifier the resolver answers in one
//! lookup, scalar `params` folded in — and last the cost estimate and the
//! run-time meter's instrumentation (`cel_bounds::bound`). Called by the
//! bundle loader through [`compile_with`]. It never evaluates anything
//! and never recurses over a tree before `limits` has measured it.

use std::collections::HashMap;
use std::sync::OnceLock;

use cel::common::ast::{CallExpr, Expr, LiteralValue};
use cel::common::types::CelString;
use cel::parser::Expression;

use super::ast::{children, children_mut, identifiers, variables_named};
use arbiter_core::cel_bounds::{bound, parse};

use super::env::{env, HAS_SET};
use super::limits::{variable_shape, CelLimits};
use super::params::fold_params;
use super::{CelError, CelProgram, VARIABLES};
use crate::view::{
    ClusterQueueView, CohortView, FlavorView, NodeView, PodView, QueueView, TenantView,
    WorkloadView,
};

/// Type names an expression may use as values (`type(x) == int`).
const TYPE_NAMES: [&str; 11] = [
    "bool",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

/// Function namespaces of the environment (`optional.of(x)`).
const NAMESPACES: [&str; 1] = ["optional"];

/// Fields of the views that may be unset (`null`): `has()` on them is true
/// only when they are set.
const OPTIONAL_FIELDS: [&str; 6] = [
    "estimate",
    "priorityClass",
    "minCount",
    "priority",
    "cohort",
    "parent",
];

/// Compiles `expression` under `limits` for a policy without `params`.
/// Line and column of a syntax error are 1-based.
pub fn compile(expression: &str, limits: &CelLimits) -> Result<CelProgram, CelError> {
    compile_with(
        expression,
        limits,
        &serde_json::Value::Object(Default::default()),
    )
}

/// Compiles `expression` under `limits` for a policy whose `params` are
/// `config`: its scalar fields folded into the program, its sizes known to
/// the cost estimate. The estimate must stay within `limits.max_cost`,
/// which is also the budget of each evaluation.
pub fn compile_with(
    expression: &str,
    limits: &CelLimits,
    config: &serde_json::Value,
) -> Result<CelProgram, CelError> {
    let env = env();
    let mut parsed = parse(&env, expression, limits)?;
    // The tree is now known to be shallow: recursion over it is safe.
    check_names(&parsed, &mut Vec::new())?;
    rewrite_has(&mut parsed);
    flatten_view_fields(&mut parsed);
    if let serde_json::Value::Object(config) = config {
        fold_params(&mut parsed, config);
    }
    let mut idents = Vec::new();
    identifiers(&parsed, &mut idents);
    idents.sort();
    idents.dedup();
    let variables = variables_named(&parsed);
    let estimated = bound(
        &mut parsed,
        limits,
        &|name| variable_shape(name, config),
        UNKNOWN_LEN,
    )?;
    Ok(CelProgram {
        variables,
        idents,
        expression: parsed,
        env,
        budget: limits.max_cost,
        estimated,
    })
}

/// The entries or bytes the estimate assumes of a value it knows nothing of
/// (what a comprehension variable of unknown shape holds, say).
const UNKNOWN_LEN: u64 = 256;

/// Refuses identifiers that are neither a variable, a comprehension's
/// variable in scope, a type name nor a function namespace.
fn check_names<'e>(node: &'e Expression, bound: &mut Vec<&'e str>) -> Result<(), CelError> {
    match &node.expr {
        Expr::Ident(name) => {
            let name = name.strip_prefix('.').unwrap_or(name);
            let known =
                VARIABLES.contains(&name) || TYPE_NAMES.contains(&name) || bound.contains(&name);
            if known {
                Ok(())
            } else {
                Err(CelError::UnknownVariable {
                    name: name.to_string(),
                })
            }
        }
        Expr::Call(CallExpr { target, args, .. }) => {
            if let Some(target) = target {
                let namespace =
                    matches!(&target.expr, Expr::Ident(n) if NAMESPACES.contains(&n.as_str()));
                if !namespace {
                    check_names(target, bound)?;
                }
            }
            args.iter().try_for_each(|a| check_names(a, bound))
        }
        Expr::Comprehension(c) => {
            check_names(&c.iter_range, bound)?;
            check_names(&c.accu_init, bound)?;
            let outer = bound.len();
            bound.push(&c.accu_var);
            bound.push(&c.iter_var);
            if let Some(second) = &c.iter_var2 {
                bound.push(second);
            }
            let inner = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .try_for_each(|e| check_names(e, bound));
            bound.truncate(outer);
            inner
        }
        other => children(other)
            .into_iter()
            .try_for_each(|c| check_names(c, bound)),
    }
}

/// `has(x.f)` for an optional view field `f` becomes `@arbiter.has(x, 'f')`.
fn rewrite_has(node: &mut Expression) {
    if let Expr::Select(select) = &mut node.expr {
        if select.test && OPTIONAL_FIELDS.contains(&select.field.as_str()) {
            let operand = std::mem::take(&mut *select.operand);
            let field = Expression {
                id: node.id,
                expr: Expr::Literal(LiteralValue::String(CelString::from(select.field.clone()))),
            };
            node.expr = Expr::Call(CallExpr {
                func_name: HAS_SET.to_string(),
                target: None,
                args: vec![operand, field],
            });
        }
    }
    children_mut(node, rewrite_has);
}

/// The views, by variable name, with the JSON names of their fields.
fn view_fields(view: &str) -> Option<&'static [String]> {
    static FIELDS: OnceLock<HashMap<&'static str, Vec<String>>> = OnceLock::new();
    fn names(schema: schemars::Schema) -> Vec<String> {
        schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default()
    }
    FIELDS
        .get_or_init(|| {
            HashMap::from([
                ("workload", names(schemars::schema_for!(WorkloadView))),
                ("queue", names(schemars::schema_for!(QueueView))),
                (
                    "clusterQueue",
                    names(schemars::schema_for!(ClusterQueueView)),
                ),
                ("tenant", names(schemars::schema_for!(TenantView))),
                ("cohort", names(schemars::schema_for!(CohortView))),
                ("flavor", names(schemars::schema_for!(FlavorView))),
                ("node", names(schemars::schema_for!(NodeView))),
                ("pod", names(schemars::schema_for!(PodView))),
            ])
        })
        .get(view)
        .map(Vec::as_slice)
}

/// `view.field` (a known field of a view variable) becomes the identifier
/// `view.field`, which the resolver answers in one lookup: cel resolves a
/// selected name by collecting its segments into a `Vec` and joining them
/// into a `String` on every evaluation, an identifier it looks up as it is.
/// The value is the same; so is every error, as only fields the view has
/// are flattened. `has(view.field)` is left alone, and so is anything
/// inside a comprehension that binds a variable named like a view.
fn flatten_view_fields(node: &mut Expression) {
    match &node.expr {
        Expr::Select(select) if !select.test => {
            if let Expr::Ident(root) = &select.operand.expr {
                if view_fields(root).is_some_and(|fields| fields.contains(&select.field)) {
                    node.expr = Expr::Ident(format!("{root}.{}", select.field));
                }
                return;
            }
        }
        Expr::Comprehension(c)
            if [Some(&c.iter_var), Some(&c.accu_var), c.iter_var2.as_ref()]
                .into_iter()
                .flatten()
                .any(|var| view_fields(var).is_some()) =>
        {
            return
        }
        _ => {}
    }
    children_mut(node, flatten_view_fields);
}
