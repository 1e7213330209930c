//! CEL policies: compiles a policy's expression once, at bundle load, and
//! evaluates it many times against the typed views of [`super::view`],
//! bound lazily — `workload.priority` reads the field of the borrowed
//! [`WorkloadView`] when the expression reaches it; nothing is converted up
//! front. Called by the policy engine (admission, weight, fairShare,
//! autoscale, flavor hooks) with a [`Vars`] per evaluation; it never mutates
//! a view, never reads a clock (`now` is given), and never panics on any
//! expression or input: every failure is a [`CelError`] at load or an
//! [`EvalError`] at evaluation, which the engine handles by the policy's
//! `failurePolicy`.
//!
//! # Variables
//!
//! | variable | type | fields |
//! |---|---|---|
//! | `workload` | [`WorkloadView`] | `name, namespace, kind, labels, annotations, priority, priorityClass, priorityWeight, queueName, clusterQueue, podSets[] {name, count, minCount, requests}, requests, gpus, ageSeconds, retries, evictions, estimate {runtimeSeconds, samples}` |
//! | `queue` | [`QueueView`] | `name, namespace, priority, clusterQueue` |
//! | `clusterQueue` | [`ClusterQueueView`] | `name, cohort, weight, share, decayedUsage, nominal, usage, priorityWeight, admitted, pending` |
//! | `tenant` | [`TenantView`] | `name, labels, annotations` |
//! | `cohort` | [`CohortView`] | `name, parent` |
//! | `flavor` | [`FlavorView`] | `name, nodes, minNodes, maxNodes, utilization, pendingNodes, targetUtilization` |
//! | `now` | `double` | seconds since the start (virtual time in the simulator) |
//! | `params` | JSON as CEL | the policy's `config`, converted once at load ([`Params`]) |
//!
//! Counts and integers (`priority`, `gpus`, `count`, `retries`, `nodes`,
//! `admitted`…) are CEL `int`; quantities, seconds, weights and fractions are
//! `double`; maps of quantities (`requests`, `nominal['a100']`) hold `double`s
//! in base units. Optional fields (`workload.priorityClass`,
//! `workload.estimate`, `podSets[i].minCount`, `queue.priority`,
//! `clusterQueue.cohort`, `cohort.parent`) are `null` when unset, so both
//! `workload.estimate != null` and `has(workload.estimate)` tell whether one
//! is set (`has()` on these fields is rewritten at load to mean "set and not
//! null"; elsewhere it keeps CEL's meaning). A variable the hook does not
//! provide (`flavor` in `weight`, say) is a runtime error naming it. JSON
//! integers in `params` are `int`, other numbers `double`.
//!
//! Functions: the CEL standard library, plus `quantity(string) -> double`,
//! a Kubernetes quantity in base units (`quantity('500m') == 0.5`,
//! `quantity('1Gi') == 1073741824.0`). The `strings` extension is left out on
//! purpose: `replace` would make the cost exponential in the expression's
//! length.
//!
//! # Sharp edges of CEL (cel 0.15, as the spec says)
//!
//! - Arithmetic never mixes `int` and `double`: `workload.priority * 1.5` and
//!   `workload.gpus + 0.5` are runtime errors; write
//!   `double(workload.priority) * 1.5`. Comparisons do mix
//!   (`workload.ageSeconds > 60`, `workload.gpus <= 8.0` work).
//! - `int / int` truncates, and division or `%` by int zero is an error;
//!   `double / 0.0` is ±inf or NaN, which [`CelProgram::eval_number`] refuses.
//! - A missing map key (`workload.labels['team']` without that label) is an
//!   error, not `null`: guard with `'team' in workload.labels`, or use
//!   `workload.labels.?team.orValue('none')`.
//! - A view is not equal to anything, itself included (`workload == workload`
//!   is false); compare fields.
//!
//! # Limits
//!
//! Checked at load by [`compile`] with [`CelLimits`]: the source is at most
//! `max_expression_bytes` (16 KiB), its parsed expression tree — macros
//! expanded — at most `max_nesting` (32) deep (measured on the AST; before
//! parsing, brackets alone may nest at most `max_nesting` deep and a
//! token-level over-estimate, operators included, at most 4× that, so the
//! recursive parser cannot overflow the stack), comprehensions (`all`,
//! `exists`, `exists_one`, `map`, `filter`) nest at most
//! `max_comprehension_nesting` (2) deep, and a list or map literal holds at
//! most `max_literal_elements` (256) entries. At evaluation, a comprehension
//! iterates over a literal or over a view collection, which the engine caps
//! with [`check_input_sizes`] ([`MAX_LABELS`], [`MAX_POD_SETS`],
//! [`MAX_RESOURCES`]): so one evaluation does at most about
//! `max(256, 64)^2` iterations.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue};
use cel::common::traits::Indexer;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelOptional, CelString,
    CelUInt, Type, DYN_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::parser::Expression;
use cel::{Context, Env, ExecutionError, Value};

use super::view::{
    ClusterQueueView, CohortView, EstimateView, FlavorView, PodSetView, Quantities, QueueView,
    TenantView, WorkloadView,
};
use arbiter_core::model::Amount;

/// Most labels, and most annotations, of a workload or tenant the engine
/// hands to a policy.
pub const MAX_LABELS: usize = 64;
/// Most pod sets of a workload (Kueue's own limit is 8).
pub const MAX_POD_SETS: usize = 16;
/// Most resources in one requests map.
pub const MAX_RESOURCES: usize = 32;

/// The names an expression may refer to, besides its comprehension variables.
pub const VARIABLES: [&str; 8] = [
    "workload",
    "queue",
    "clusterQueue",
    "tenant",
    "cohort",
    "flavor",
    "now",
    "params",
];

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

/// What a policy expression may cost, checked at load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CelLimits {
    /// Longest source, in bytes (default 16 KiB).
    pub max_expression_bytes: usize,
    /// Deepest expression tree, macros expanded (default 32).
    pub max_nesting: usize,
    /// Deepest nesting of comprehensions (default 2).
    pub max_comprehension_nesting: usize,
    /// Most elements of one list or map literal (default 256).
    pub max_literal_elements: usize,
}

impl Default for CelLimits {
    fn default() -> Self {
        CelLimits {
            max_expression_bytes: 16 * 1024,
            max_nesting: 32,
            max_comprehension_nesting: 2,
            max_literal_elements: 256,
        }
    }
}

/// Why an expression was refused at load. The caller adds the policy name.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum CelError {
    #[error("syntax error at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("expression is {bytes} bytes long; at most {max} are allowed")]
    TooLong { bytes: usize, max: usize },
    #[error(
        "expression nests {depth} deep; at most {max} is allowed — split it into simpler terms"
    )]
    TooDeep { depth: usize, max: usize },
    #[error(
        "comprehensions (all, exists, map, filter…) nest {depth} deep; at most {max} is allowed"
    )]
    TooManyComprehensions { depth: usize, max: usize },
    #[error("a list or map literal has {elements} elements; at most {max} are allowed")]
    LiteralTooLarge { elements: usize, max: usize },
    #[error("unknown variable `{name}`; the variables are workload, queue, clusterQueue, tenant, cohort, flavor, now and params")]
    UnknownVariable { name: String },
}

/// Why one evaluation failed.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum EvalError {
    /// No such key, division by zero, a variable the hook does not provide…
    #[error("{0}")]
    Runtime(String),
    #[error("the expression must yield {expected}, got {got}")]
    WrongType { expected: &'static str, got: String },
    #[error("the expression yielded a number that is not finite (NaN or infinite)")]
    NotFinite,
}

/// A policy's `config`, converted once at load into a CEL value.
#[derive(Debug)]
pub struct Params {
    value: Box<dyn Val>,
}

impl Params {
    pub fn new(config: &serde_json::Value) -> Params {
        Params {
            value: json_to_val(config),
        }
    }
}

/// JSON as a CEL value: integers as `int` (else `uint`), other numbers as
/// `double`, as the job integrations do.
fn json_to_val(value: &serde_json::Value) -> Box<dyn Val> {
    use serde_json::Value as Json;
    match value {
        Json::Null => Box::new(CelNull),
        Json::Bool(b) => Box::new(CelBool::from(*b)),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(int), _, _) => Box::new(CelInt::from(int)),
            (None, Some(uint), _) => Box::new(CelUInt::from(uint)),
            (None, None, Some(float)) => Box::new(CelDouble::from(float)),
            (None, None, None) => Box::new(CelNull),
        },
        Json::String(s) => Box::new(CelString::from(s.clone())),
        Json::Array(items) => Box::new(CelList::from(
            items.iter().map(json_to_val).collect::<Vec<_>>(),
        )),
        Json::Object(fields) => Box::new(CelMap::from(
            fields
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.clone()), json_to_val(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// Variables of one evaluation; any may be absent (then referencing it is a
/// runtime error naming it).
#[derive(Default, Clone, Copy)]
pub struct Vars<'a> {
    pub workload: Option<&'a WorkloadView>,
    pub queue: Option<&'a QueueView>,
    pub cluster_queue: Option<&'a ClusterQueueView>,
    pub tenant: Option<&'a TenantView>,
    pub cohort: Option<&'a CohortView>,
    pub flavor: Option<&'a FlavorView>,
    pub now: f64,
    pub params: Option<&'a Params>,
}

/// Refuses a workload whose collections exceed the caps the cost bound of
/// the module doc rests on. The engine calls it once per workload, before
/// evaluating policies on it.
pub fn check_input_sizes(workload: &WorkloadView) -> Result<(), EvalError> {
    let too_many = |what: &str, n: usize, max: usize| {
        Err(EvalError::Runtime(format!(
            "workload {}/{} has {n} {what}; policies see at most {max}",
            workload.namespace, workload.name
        )))
    };
    if workload.labels.len() > MAX_LABELS {
        return too_many("labels", workload.labels.len(), MAX_LABELS);
    }
    if workload.annotations.len() > MAX_LABELS {
        return too_many("annotations", workload.annotations.len(), MAX_LABELS);
    }
    if workload.pod_sets.len() > MAX_POD_SETS {
        return too_many("pod sets", workload.pod_sets.len(), MAX_POD_SETS);
    }
    let resources = workload
        .pod_sets
        .iter()
        .map(|ps| ps.requests.len())
        .chain([workload.requests.len()])
        .max()
        .unwrap_or(0);
    if resources > MAX_RESOURCES {
        return too_many("resources in one requests map", resources, MAX_RESOURCES);
    }
    Ok(())
}

/// A compiled expression: parsed, checked and rewritten once; `Send + Sync`
/// and cheap to evaluate many times.
pub struct CelProgram {
    expression: Expression,
    env: Arc<Env>,
    /// Bit `i` set: the expression names [`VARIABLES`]`[i]`.
    variables: u8,
    /// Every identifier, after `view.field` flattening (sorted, distinct).
    idents: Vec<String>,
}

impl std::fmt::Debug for CelProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelProgram")
            .field("expression", &self.expression)
            .finish_non_exhaustive()
    }
}

/// The environment every policy runs in: the standard library and
/// `quantity()`. Built once per process.
fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    Arc::clone(ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // A fresh stdlib declares neither name: these cannot conflict.
        let declared = env
            .add_overload("quantity", "quantity_string", vec![STRING_TYPE], quantity)
            .and_then(|()| {
                env.add_overload(HAS_SET, "has_set", vec![DYN_TYPE, STRING_TYPE], has_set)
            });
        if let Err(e) = declared {
            unreachable!("declaring the policy functions on a fresh CEL stdlib: {e}");
        }
        Arc::new(env)
    }))
}

/// `quantity('500m')`: a Kubernetes quantity in base units.
fn quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = args
        .first()
        .and_then(|a| a.downcast_ref::<CelString>())
        .ok_or_else(|| ExecutionError::function_error("quantity", "expects one string"))?;
    let amount =
        Amount::parse(text.inner()).map_err(|e| ExecutionError::function_error("quantity", e))?;
    Ok(CowVal::owned(CelDouble::from(amount.as_f64())))
}

/// The function `has(x.f)` on an optional field becomes: on a view, whether
/// `f` is set and not `null`; on anything else, CEL's own `has()`.
const HAS_SET: &str = "@arbiter.has";

fn has_set<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [operand, field] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let operand: &dyn Val = operand.as_ref();
    let operand = match operand.downcast_ref::<CelOptional>() {
        Some(optional) => match optional.option() {
            Some(inner) => inner,
            None => return Ok(CowVal::owned(CelBool::from(false))),
        },
        None => operand,
    };
    let is_view = operand.get_type().name().starts_with("arbiter.");
    let indexer = operand.as_indexer().ok_or_else(|| {
        ExecutionError::no_such_overload(
            "_._",
            vec![operand.get_type().name().to_owned(), "string".to_owned()],
        )
    })?;
    let present = match indexer.get(field.as_ref()) {
        Ok(value) => !is_view || value.downcast_ref::<CelNull>().is_none(),
        Err(ExecutionError::NoSuchKey(_)) => false,
        Err(e) => return Err(e),
    };
    Ok(CowVal::owned(CelBool::from(present)))
}

/// How many times `max_nesting` the token-level estimate of nesting may
/// reach before the source is refused unparsed ([`lexical_depth`]
/// over-estimates: `a.b + c.d` counts 3).
const LEXICAL_SLACK: usize = 4;

/// Compiles `expression` under `limits`. Line and column of a syntax error
/// are 1-based.
pub fn compile(expression: &str, limits: &CelLimits) -> Result<CelProgram, CelError> {
    if expression.len() > limits.max_expression_bytes {
        return Err(CelError::TooLong {
            bytes: expression.len(),
            max: limits.max_expression_bytes,
        });
    }
    let (brackets, lexical_depth) = lexical_depth(expression);
    if brackets > limits.max_nesting {
        return Err(CelError::TooDeep {
            depth: brackets,
            max: limits.max_nesting,
        });
    }
    let parser_limit = limits.max_nesting.saturating_mul(LEXICAL_SLACK);
    if lexical_depth > parser_limit {
        return Err(CelError::TooDeep {
            depth: lexical_depth,
            max: limits.max_nesting,
        });
    }
    let env = env();
    let parser = env
        .parser()
        .max_recursion_depth(u16::try_from(parser_limit).unwrap_or(u16::MAX));
    let mut parsed = parser.parse(expression).map_err(|errors| {
        let first = errors.errors.first();
        match first {
            Some(e) if e.msg.starts_with("Recursion limit") => CelError::TooDeep {
                depth: lexical_depth,
                max: limits.max_nesting,
            },
            // cel reports 1-based lines and columns
            _ => {
                let (line, column) = first.map_or((1, 1), |e| e.pos);
                CelError::Syntax {
                    line: usize::try_from(line).unwrap_or(1).max(1),
                    column: usize::try_from(column).unwrap_or(1).max(1),
                    message: first
                        .map_or_else(|| "invalid expression".to_string(), |e| e.msg.clone()),
                }
            }
        }
    })?;
    let shape = measure(&parsed);
    if shape.depth > limits.max_nesting {
        return Err(CelError::TooDeep {
            depth: shape.depth,
            max: limits.max_nesting,
        });
    }
    if shape.comprehension_depth > limits.max_comprehension_nesting {
        return Err(CelError::TooManyComprehensions {
            depth: shape.comprehension_depth,
            max: limits.max_comprehension_nesting,
        });
    }
    if shape.literal_elements > limits.max_literal_elements {
        return Err(CelError::LiteralTooLarge {
            elements: shape.literal_elements,
            max: limits.max_literal_elements,
        });
    }
    // The tree is now known to be shallow: recursion over it is safe.
    check_names(&parsed, &mut Vec::new())?;
    rewrite_has(&mut parsed);
    flatten_view_fields(&mut parsed);
    let mut idents = Vec::new();
    identifiers(&parsed, &mut idents);
    idents.sort();
    idents.dedup();
    Ok(CelProgram {
        variables: variables_named(&parsed),
        idents,
        expression: parsed,
        env,
    })
}

/// How deep the source could nest, from its tokens alone: the deepest
/// nesting of brackets, and an over-estimate of the parse tree's depth —
/// brackets plus every operator, `.` and `in`, each counted as one more
/// level for the rest of its bracket group. Checked before parsing so that
/// the parser, which recurses (several frames per bracket), never sees an
/// expression deep enough to overflow the stack.
fn lexical_depth(source: &str) -> (usize, usize) {
    let mut deepest_brackets = 0usize;
    // operators seen so far in each enclosing bracket group
    let mut groups: Vec<usize> = vec![0];
    let mut operators = 0usize;
    let mut deepest = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut previous_was_operator = false;
    let mut word = String::new();
    for c in source.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            previous_was_operator = false;
            continue;
        }
        let count = |groups: &mut Vec<usize>, operators: &mut usize| {
            if let Some(top) = groups.last_mut() {
                *top += 1;
            }
            *operators += 1;
        };
        if word == "in" {
            count(&mut groups, &mut operators);
        }
        word.clear();
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => groups.push(0),
            ')' | ']' | '}' if groups.len() > 1 => {
                operators -= groups.pop().unwrap_or(0);
            }
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '.' | '?' | '&' | '|'
                if !previous_was_operator =>
            {
                count(&mut groups, &mut operators);
            }
            _ => {}
        }
        if !c.is_whitespace() {
            previous_was_operator = "+-*/%<>=!.?&|".contains(c);
        }
        deepest = deepest.max(groups.len() + operators);
        deepest_brackets = deepest_brackets.max(groups.len() - 1);
    }
    (deepest_brackets, deepest)
}

#[derive(Default)]
struct Shape {
    depth: usize,
    comprehension_depth: usize,
    literal_elements: usize,
}

/// The children of a node, in evaluation order.
fn children(expr: &Expr) -> Vec<&Expression> {
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

/// Depth, comprehension nesting and largest literal of a tree of any depth,
/// without recursion.
fn measure(root: &Expression) -> Shape {
    let mut shape = Shape::default();
    let mut stack = vec![(root, 1usize, 0usize)];
    while let Some((node, depth, comprehensions)) = stack.pop() {
        shape.depth = shape.depth.max(depth);
        let comprehensions =
            comprehensions + usize::from(matches!(node.expr, Expr::Comprehension(_)));
        shape.comprehension_depth = shape.comprehension_depth.max(comprehensions);
        match &node.expr {
            Expr::List(list) => {
                shape.literal_elements = shape.literal_elements.max(list.elements.len());
            }
            Expr::Map(map) => {
                shape.literal_elements = shape.literal_elements.max(map.entries.len())
            }
            _ => {}
        }
        for child in children(&node.expr) {
            stack.push((child, depth + 1, comprehensions));
        }
    }
    shape
}

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

/// Calls `f` on each direct child of `node`.
fn children_mut(node: &mut Expression, mut f: impl FnMut(&mut Expression)) {
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
fn variables_named(node: &Expression) -> u8 {
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

fn identifiers(node: &Expression, out: &mut Vec<String>) {
    if let Expr::Ident(name) = &node.expr {
        out.push(name.strip_prefix('.').unwrap_or(name).to_string());
    }
    for child in children(&node.expr) {
        identifiers(child, out);
    }
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

/// Folds `params.<field>` into the literal of that field of the policy's
/// `config` where it is a scalar (params are constants of the policy), so an
/// evaluation does not look them up. The literal is the value `params`
/// would have resolved to at run time (`json_to_val`): the result and its
/// errors are unchanged. Lists, maps, missing fields and `has(params.x)` are
/// left as they are, and so is anything inside a comprehension that binds a
/// variable named `params`.
fn fold_params(node: &mut Expression, config: &serde_json::Map<String, serde_json::Value>) {
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

/// A scalar of `config` as the literal `json_to_val` would make of it.
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

impl CelProgram {
    /// Whether the expression names `variable` (one of [`VARIABLES`]).
    pub fn names(&self, variable: &str) -> bool {
        VARIABLES
            .iter()
            .position(|&v| v == variable)
            .is_some_and(|i| self.variables & (1 << i) != 0)
    }

    /// Whether the expression may read `field` of view `variable`: it names
    /// `variable.field` (flattened), or the view itself in any other way
    /// (`has(variable.field)`, `variable[...]`, passing it whole, a
    /// comprehension variable of that name) — an over-estimate, never an under-.
    pub fn reads_field(&self, variable: &str, field: &str) -> bool {
        self.idents.iter().any(|ident| {
            ident == variable
                || ident
                    .strip_prefix(variable)
                    .and_then(|rest| rest.strip_prefix('.'))
                    == Some(field)
        })
    }

    /// Folds the policy's scalar `config` values into the program (see
    /// `fold_params`); call once, after compiling, with the config the
    /// policy's evaluations will see as `params`.
    pub fn fold_params(&mut self, config: &serde_json::Value) {
        if let serde_json::Value::Object(config) = config {
            fold_params(&mut self.expression, config);
        }
    }

    pub fn eval_bool(&self, vars: &Vars) -> Result<bool, EvalError> {
        self.eval(vars, |value| {
            value
                .downcast_ref::<CelBool>()
                .map(|b| *b.inner())
                .ok_or_else(|| wrong_type("a bool", value))
        })
    }

    /// An `int`, `uint` or `double`, as a finite `f64`.
    pub fn eval_number(&self, vars: &Vars) -> Result<f64, EvalError> {
        self.eval(vars, |value| {
            let number = if let Some(d) = value.downcast_ref::<CelDouble>() {
                *d.inner()
            } else if let Some(i) = value.downcast_ref::<CelInt>() {
                *i.inner() as f64
            } else if let Some(u) = value.downcast_ref::<CelUInt>() {
                *u.inner() as f64
            } else {
                return Err(wrong_type("a number", value));
            };
            if number.is_finite() {
                Ok(number)
            } else {
                Err(EvalError::NotFinite)
            }
        })
    }

    pub fn eval_string(&self, vars: &Vars) -> Result<String, EvalError> {
        self.eval(vars, |value| {
            value
                .downcast_ref::<CelString>()
                .map(|s| s.inner().to_string())
                .ok_or_else(|| wrong_type("a string", value))
        })
    }

    pub fn eval_string_list(&self, vars: &Vars) -> Result<Vec<String>, EvalError> {
        self.eval(vars, |value| {
            let list = value
                .downcast_ref::<CelList>()
                .ok_or_else(|| wrong_type("a list of strings", value))?;
            list.inner()
                .iter()
                .map(|item| {
                    item.downcast_ref::<CelString>()
                        .map(|s| s.inner().to_string())
                        .ok_or_else(|| wrong_type("a list of strings", item.as_ref()))
                })
                .collect()
        })
    }

    fn eval<R>(
        &self,
        vars: &Vars,
        extract: impl FnOnce(&dyn Val) -> Result<R, EvalError>,
    ) -> Result<R, EvalError> {
        let scope = Scope::new(vars);
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.set_variable_resolver(&scope);
        let value = Value::resolve_val(&self.expression, &context).map_err(runtime_error)?;
        extract(value.as_ref())
    }
}

fn wrong_type(expected: &'static str, value: &dyn Val) -> EvalError {
    EvalError::WrongType {
        expected,
        got: value.get_type().name().to_string(),
    }
}

fn runtime_error(error: ExecutionError) -> EvalError {
    // A flattened `view.field` (see `flatten_view_fields`) is missing only
    // when its view is: report the view, as an unflattened select would.
    let root = |name: &str| name.split('.').next().unwrap_or(name).to_string();
    EvalError::Runtime(match error {
        ExecutionError::UndeclaredReference(name) if VARIABLES.contains(&root(&name).as_str()) => {
            format!("variable `{}` is not available to this hook", root(&name))
        }
        ExecutionError::UndeclaredReference(name) => format!("unknown name `{name}`"),
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        other => other.to_string(),
    })
}

/// The variables of one evaluation, as CEL values borrowing the views.
struct Scope<'a> {
    workload: Option<WorkloadVal<'a>>,
    queue: Option<QueueVal<'a>>,
    cluster_queue: Option<ClusterQueueVal<'a>>,
    tenant: Option<TenantVal<'a>>,
    cohort: Option<CohortVal<'a>>,
    flavor: Option<FlavorVal<'a>>,
    now: CelDouble,
    params: Option<&'a Params>,
}

impl<'a> Scope<'a> {
    fn new(vars: &Vars<'a>) -> Scope<'a> {
        Scope {
            workload: vars.workload.map(WorkloadVal),
            queue: vars.queue.map(QueueVal),
            cluster_queue: vars.cluster_queue.map(ClusterQueueVal),
            tenant: vars.tenant.map(TenantVal),
            cohort: vars.cohort.map(CohortVal),
            flavor: vars.flavor.map(FlavorVal),
            now: CelDouble::from(vars.now),
            params: vars.params,
        }
    }
}

fn borrowed<'b, 'v>(value: &'b (dyn Val + 'v)) -> CowVal<'b, 'v> {
    CowVal::Borrowed(value)
}

impl Scope<'_> {
    /// A view variable by name.
    fn view(&self, variable: &str) -> Option<&dyn Val> {
        match variable {
            "workload" => self.workload.as_ref().map(|v| v as &dyn Val),
            "queue" => self.queue.as_ref().map(|v| v as &dyn Val),
            "clusterQueue" => self.cluster_queue.as_ref().map(|v| v as &dyn Val),
            "tenant" => self.tenant.as_ref().map(|v| v as &dyn Val),
            "cohort" => self.cohort.as_ref().map(|v| v as &dyn Val),
            "flavor" => self.flavor.as_ref().map(|v| v as &dyn Val),
            _ => None,
        }
    }
}

impl VariableResolver for Scope<'_> {
    /// cel asks for the whole qualified name first (`workload.priority`),
    /// then for shorter prefixes: answering `view.field` at once saves it a
    /// second lookup. Anything else (a missing field, deeper paths) is left
    /// to cel, which then reports the error.
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if let Some((root, field)) = variable.split_once('.') {
            if field.contains('.') {
                return None;
            }
            let indexer = self.view(root)?.as_indexer()?;
            return indexer.get(&CelString::from(field)).ok();
        }
        match variable {
            "workload" => self.workload.as_ref().map(|v| borrowed(v)),
            "queue" => self.queue.as_ref().map(|v| borrowed(v)),
            "clusterQueue" => self.cluster_queue.as_ref().map(|v| borrowed(v)),
            "tenant" => self.tenant.as_ref().map(|v| borrowed(v)),
            "cohort" => self.cohort.as_ref().map(|v| borrowed(v)),
            "flavor" => self.flavor.as_ref().map(|v| borrowed(v)),
            "now" => Some(borrowed(&self.now)),
            "params" => self.params.map(|p| borrowed(p.value.as_ref())),
            _ => None,
        }
    }
}

// Field values, borrowing the view's data for `'v`.

fn int<'b, 'v>(value: i64) -> CowVal<'b, 'v> {
    CowVal::owned(CelInt::from(value))
}

fn double<'b, 'v>(value: f64) -> CowVal<'b, 'v> {
    CowVal::owned(CelDouble::from(value))
}

fn string<'b, 'v>(value: &'v str) -> CowVal<'b, 'v> {
    CowVal::owned(CelString::from(value))
}

fn optional<'b, 'v, T>(
    value: Option<T>,
    to_val: impl FnOnce(T) -> CowVal<'b, 'v>,
) -> CowVal<'b, 'v> {
    value.map_or_else(|| CowVal::owned(CelNull), to_val)
}

fn string_map<'b, 'v>(map: &'v BTreeMap<String, String>) -> CowVal<'b, 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(k, v)| {
            let value: Box<dyn Val + 'v> = Box::new(CelString::from(v.as_str()));
            (CelMapKey::from(k.as_str()), value)
        })
        .collect();
    CowVal::owned(CelMap::from(entries))
}

fn quantities_val<'v>(map: &'v Quantities) -> Box<dyn Val + 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(k, v)| {
            let value: Box<dyn Val + 'v> = Box::new(CelDouble::from(*v));
            (CelMapKey::from(k.as_str()), value)
        })
        .collect();
    Box::new(CelMap::from(entries))
}

fn quantities<'b, 'v>(map: &'v Quantities) -> CowVal<'b, 'v> {
    CowVal::Owned(quantities_val(map))
}

fn quantities_by_flavor<'b, 'v>(map: &'v BTreeMap<String, Quantities>) -> CowVal<'b, 'v> {
    let entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = map
        .iter()
        .map(|(k, v)| (CelMapKey::from(k.as_str()), quantities_val(v)))
        .collect();
    CowVal::owned(CelMap::from(entries))
}

fn pod_sets<'b, 'v>(pod_sets: &'v [PodSetView]) -> CowVal<'b, 'v> {
    let items: Vec<Box<dyn Val + 'v>> = pod_sets
        .iter()
        .map(|ps| Box::new(PodSetVal(ps)) as Box<dyn Val + 'v>)
        .collect();
    CowVal::owned(CelList::from(items))
}

fn string_list<'b, 'v>(items: &'v [String]) -> CowVal<'b, 'v> {
    let items: Vec<Box<dyn Val + 'v>> = items
        .iter()
        .map(|s| Box::new(CelString::from(s.as_str())) as Box<dyn Val + 'v>)
        .collect();
    CowVal::owned(CelList::from(items))
}

/// The field name of `x.f` or `x['f']`.
fn field_name(index: &dyn Val) -> Result<&str, ExecutionError> {
    index
        .downcast_ref::<CelString>()
        .map(CelString::inner)
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: index.get_type().name().to_string(),
            want: "string".to_string(),
        })
}

/// A CEL value borrowing one view struct: its type, and field access by
/// the JSON (camelCase) names.
macro_rules! view_val {
    ($val:ident, $view:ty, $type_name:literal, |$v:ident, $field:ident| $lookup:expr) => {
        #[derive(Clone, Copy, Debug)]
        struct $val<'a>(&'a $view);

        impl Val for $val<'_> {
            fn get_type(&self) -> &Type {
                static TYPE: Type = Type::new_unspecified_type($type_name);
                &TYPE
            }

            fn cel_type() -> &'static Type {
                static TYPE: Type = Type::new_unspecified_type($type_name);
                &TYPE
            }

            fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
            where
                Self: 'v,
            {
                Some(self)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
            where
                Self: 'v,
            {
                Box::new(*self)
            }
        }

        impl Indexer for $val<'_> {
            fn get<'b, 'v>(&'b self, index: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
            where
                Self: 'v,
            {
                let $v = self.0;
                let $field = field_name(index)?;
                $lookup
            }

            fn steal<'v>(
                self: Box<Self>,
                index: &dyn Val,
            ) -> Result<Box<dyn Val + 'v>, ExecutionError>
            where
                Self: 'v,
            {
                self.get(index).map(CowVal::into_owned)
            }
        }
    };
}

view_val!(WorkloadVal, WorkloadView, "arbiter.Workload", |w, field| {
    Ok(match field {
        "name" => string(&w.name),
        "namespace" => string(&w.namespace),
        "kind" => string(&w.kind),
        "labels" => string_map(&w.labels),
        "annotations" => string_map(&w.annotations),
        "priority" => int(w.priority),
        "priorityClass" => optional(w.priority_class.as_deref(), string),
        "priorityWeight" => double(w.priority_weight),
        "queueName" => string(&w.queue_name),
        "clusterQueue" => string(&w.cluster_queue),
        "podSets" => pod_sets(&w.pod_sets),
        "requests" => quantities(&w.requests),
        "gpus" => int(w.gpus),
        "ageSeconds" => double(w.age_seconds),
        "retries" => int(i64::from(w.retries)),
        "evictions" => int(i64::from(w.evictions)),
        "estimate" => optional(w.estimate.as_ref(), |e| CowVal::owned(EstimateVal(e))),
        "flavors" => string_list(&w.flavors),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(PodSetVal, PodSetView, "arbiter.PodSet", |p, field| {
    Ok(match field {
        "name" => string(&p.name),
        "count" => int(i64::from(p.count)),
        "minCount" => optional(p.min_count, |n| int(i64::from(n))),
        "requests" => quantities(&p.requests),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(EstimateVal, EstimateView, "arbiter.Estimate", |e, field| {
    Ok(match field {
        "runtimeSeconds" => double(e.runtime_seconds),
        "samples" => int(i64::from(e.samples)),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(QueueVal, QueueView, "arbiter.Queue", |q, field| {
    Ok(match field {
        "name" => string(&q.name),
        "namespace" => string(&q.namespace),
        "priority" => optional(q.priority, int),
        "clusterQueue" => string(&q.cluster_queue),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(
    ClusterQueueVal,
    ClusterQueueView,
    "arbiter.ClusterQueue",
    |c, field| {
        Ok(match field {
            "name" => string(&c.name),
            "cohort" => optional(c.cohort.as_deref(), string),
            "weight" => double(c.weight),
            "share" => double(c.share),
            "decayedUsage" => double(c.decayed_usage),
            "nominal" => quantities_by_flavor(&c.nominal),
            "usage" => quantities_by_flavor(&c.usage),
            "priorityWeight" => double(c.priority_weight),
            "admitted" => int(i64::from(c.admitted)),
            "pending" => int(i64::from(c.pending)),
            _ => return Err(ExecutionError::no_such_key(field)),
        })
    }
);

view_val!(TenantVal, TenantView, "arbiter.Tenant", |t, field| {
    Ok(match field {
        "name" => string(&t.name),
        "labels" => string_map(&t.labels),
        "annotations" => string_map(&t.annotations),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(CohortVal, CohortView, "arbiter.Cohort", |c, field| {
    Ok(match field {
        "name" => string(&c.name),
        "parent" => optional(c.parent.as_deref(), string),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

view_val!(FlavorVal, FlavorView, "arbiter.Flavor", |f, field| {
    Ok(match field {
        "name" => string(&f.name),
        "nodes" => int(i64::from(f.nodes)),
        "minNodes" => int(i64::from(f.min_nodes)),
        "maxNodes" => int(i64::from(f.max_nodes)),
        "utilization" => double(f.utilization),
        "pendingNodes" => double(f.pending_nodes),
        "targetUtilization" => double(f.target_utilization),
        _ => return Err(ExecutionError::no_such_key(field)),
    })
});

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> WorkloadView {
        WorkloadView {
            name: "train-llm".into(),
            namespace: "research".into(),
            kind: "Job".into(),
            labels: BTreeMap::from([
                ("team".into(), "nlp".into()),
                ("urgent".into(), "true".into()),
            ]),
            priority: 100,
            priority_weight: 2.0,
            queue_name: "research".into(),
            cluster_queue: "gpu".into(),
            pod_sets: vec![PodSetView {
                name: "workers".into(),
                count: 4,
                min_count: None,
                requests: BTreeMap::from([("cpu".into(), 8.0), ("nvidia.com/gpu".into(), 2.0)]),
            }],
            requests: BTreeMap::from([("cpu".into(), 32.0), ("nvidia.com/gpu".into(), 8.0)]),
            gpus: 8,
            age_seconds: 600.0,
            ..WorkloadView::default()
        }
    }

    fn queue() -> QueueView {
        QueueView {
            name: "research".into(),
            namespace: "research".into(),
            priority: Some(3),
            cluster_queue: "gpu".into(),
        }
    }

    fn program(expression: &str) -> CelProgram {
        compile(expression, &CelLimits::default())
            .unwrap_or_else(|e| panic!("`{expression}` should compile: {e}"))
    }

    fn vars<'a>(w: &'a WorkloadView, q: &'a QueueView, params: &'a Params) -> Vars<'a> {
        Vars {
            workload: Some(w),
            queue: Some(q),
            now: 1000.0,
            params: Some(params),
            ..Vars::default()
        }
    }

    #[test]
    fn folded_params_give_the_same_results_and_errors() {
        let (w, q) = (workload(), queue());
        let config = serde_json::json!({
            "int": 3, "big": u64::MAX, "double": 2.5, "text": "urgent", "yes": true,
            "none": null, "teams": ["nlp"], "nested": {"k": 1}
        });
        let params = Params::new(&config);
        let v = vars(&w, &q, &params);
        let numbers = [
            "double(params.int) * params.double",
            "params.double * 2.0 + double(params.big) * 0.0",
            "params.yes ? params.double : 0.0",
            "params.int * 1.5",     // int * double: no such overload
            "params.missing * 1.0", // no such key
            "params.none == null ? 1.0 : 0.0",
            "double(params.nested.k)",
            "[1.0, 2.0].map(params, params * 2.0)[1]", // shadowed: not folded
        ];
        let booleans = [
            "params.text in workload.labels",
            "has(params.text) && !has(params.missing)",
            "workload.labels['team'] in params.teams",
            "[1, 2].exists(params, params > 1)",
        ];
        let strings = ["params.text + '!'", "string(params.int) + params.text"];
        let both = |e: &str| {
            let mut folded = program(e);
            folded.fold_params(&config);
            (program(e), folded)
        };
        for e in numbers {
            let (plain, folded) = both(e);
            assert_eq!(
                format!("{:?}", plain.eval_number(&v)),
                format!("{:?}", folded.eval_number(&v)),
                "{e}"
            );
        }
        for e in booleans {
            let (plain, folded) = both(e);
            assert_eq!(
                format!("{:?}", plain.eval_bool(&v)),
                format!("{:?}", folded.eval_bool(&v)),
                "{e}"
            );
        }
        for e in strings {
            let (plain, folded) = both(e);
            assert_eq!(
                format!("{:?}", plain.eval_string(&v)),
                format!("{:?}", folded.eval_string(&v)),
                "{e}"
            );
        }
        // Folding happened: the folded program runs without any `params`.
        let mut folded = program("params.double * 2.0");
        folded.fold_params(&config);
        let no_params = Vars {
            params: None,
            ..vars(&w, &q, &params)
        };
        assert_eq!(folded.eval_number(&no_params).unwrap(), 5.0);
        assert!(program("params.double * 2.0")
            .eval_number(&no_params)
            .is_err());
    }

    #[test]
    fn reads_field_over_estimates_never_under() {
        let reads = |e: &str| program(e).reads_field("clusterQueue", "nominal");
        assert!(!reads("clusterQueue.decayedUsage > 0.0"));
        assert!(!reads("clusterQueue.usage.size() > 0"));
        assert!(!reads("workload.namespace == 'nominal'"));
        for e in [
            "clusterQueue.nominal.size() > 0",
            "clusterQueue.nominal['a100']['nvidia.com/gpu'] > 1.0",
            // The view itself, not one field of it: anything may be read.
            "has(clusterQueue.nominal)",
            "clusterQueue['nominal'].size() > 0",
            "[clusterQueue].exists(c, c.weight > 0.0)",
            "[1].exists(clusterQueue, clusterQueue > 0)",
        ] {
            assert!(reads(e), "{e}");
        }
    }

    #[test]
    fn known_view_fields_are_flattened_into_identifiers() {
        let flattened = |e: &str| format!("{:?}", program(e).expression);
        let debug = flattened("workload.gpus > 1 && queue.name == 'q'");
        assert!(debug.contains(r#"Ident("workload.gpus")"#), "{debug}");
        assert!(debug.contains(r#"Ident("queue.name")"#), "{debug}");
        // Unknown fields, has() and shadowed views keep their selects.
        for e in [
            "workload.gpuz > 1",
            "has(workload.labels)",
            "[1].exists(workload, workload.gpus > 0)",
        ] {
            assert!(!flattened(e).contains("Ident(\"workload."), "{e}");
        }
        let (w, q) = (workload(), queue());
        let params = Params::new(&serde_json::Value::Null);
        let error = program("workload.gpuz > 1")
            .eval_bool(&vars(&w, &q, &params))
            .unwrap_err()
            .to_string();
        assert!(error.contains("gpuz"), "{error}");
    }

    #[test]
    fn programs_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CelProgram>();
        assert_send_sync::<Params>();
    }

    #[test]
    fn evaluates_each_result_type_on_realistic_views() {
        let (w, q) = (workload(), queue());
        let params = Params::new(
            &serde_json::json!({"boostLabel": "urgent", "boost": 2.5, "teams": ["nlp", "vision"]}),
        );
        let v = vars(&w, &q, &params);
        let number = |e: &str| program(e).eval_number(&v).unwrap();
        let boolean = |e: &str| program(e).eval_bool(&v).unwrap();
        assert_eq!(
            number("double(workload.priority) * workload.priorityWeight * 10.0 + workload.ageSeconds / 60.0 + double(queue.priority) * 5.0"),
            100.0 * 2.0 * 10.0 + 10.0 + 15.0
        );
        assert_eq!(number("workload.gpus * 2"), 16.0);
        assert_eq!(
            number("workload.podSets[0].requests['cpu'] * double(workload.podSets[0].count)"),
            32.0
        );
        assert_eq!(number("workload.requests['nvidia.com/gpu']"), 8.0);
        assert_eq!(number("now - workload.ageSeconds"), 400.0);
        assert_eq!(
            number("params.boostLabel in workload.labels ? params.boost : 1.0"),
            2.5
        );
        assert_eq!(number("quantity('500m') + quantity('1Ki')"), 1024.5);
        assert!(boolean("workload.gpus <= 8"));
        assert!(boolean("workload.gpus <= 8.0 && workload.ageSeconds > 60"));
        assert!(boolean("workload.labels['team'] in params.teams"));
        assert!(boolean(
            "workload.podSets.all(p, p.count > 0 && p.requests.exists(r, r == 'cpu'))"
        ));
        assert!(boolean(
            "size(workload.podSets) == 1 && size(workload.labels) == 2"
        ));
        assert!(boolean("workload.labels.?owner.orValue('none') == 'none'"));
        assert_eq!(
            program("'development jobs may ask for at most 8 GPUs, got ' + string(workload.gpus)")
                .eval_string(&v)
                .unwrap(),
            "development jobs may ask for at most 8 GPUs, got 8"
        );
        assert_eq!(
            program("workload.podSets.map(p, p.name) + [workload.clusterQueue, queue.name]")
                .eval_string_list(&v)
                .unwrap(),
            ["workers", "gpu", "research"]
        );
        let flavor = FlavorView {
            name: "a100".into(),
            nodes: 4,
            min_nodes: 1,
            max_nodes: 10,
            utilization: 0.9,
            pending_nodes: 1.5,
            target_utilization: 75.0,
        };
        let cq = ClusterQueueView {
            name: "gpu".into(),
            decayed_usage: 3600.0,
            nominal: BTreeMap::from([(
                "a100".into(),
                BTreeMap::from([("nvidia.com/gpu".into(), 16.0)]),
            )]),
            ..ClusterQueueView::default()
        };
        let v = Vars {
            flavor: Some(&flavor),
            cluster_queue: Some(&cq),
            ..Vars::default()
        };
        assert_eq!(
            program("double(flavor.nodes) * flavor.utilization * 100.0 / flavor.targetUtilization + flavor.pendingNodes").eval_number(&v).unwrap(),
            4.0 * 0.9 * 100.0 / 75.0 + 1.5
        );
        assert_eq!(
            program("clusterQueue.nominal['a100']['nvidia.com/gpu'] / clusterQueue.decayedUsage")
                .eval_number(&v)
                .unwrap(),
            16.0 / 3600.0
        );
    }

    #[test]
    fn optional_fields_are_null_when_unset_and_has_tells_whether_they_are_set() {
        let (mut w, q) = (workload(), queue());
        let params = Params::new(&serde_json::json!({"a": null}));
        let v = vars(&w, &q, &params);
        let boolean = |e: &str, v: &Vars| program(e).eval_bool(v).unwrap();
        assert!(boolean("workload.estimate == null", &v));
        assert!(!boolean("has(workload.estimate)", &v));
        assert!(!boolean("has(workload.priorityClass)", &v));
        assert!(boolean("workload.priorityClass == null", &v));
        assert!(!boolean("has(workload.podSets[0].minCount)", &v));
        assert!(boolean("has(queue.priority)", &v));
        assert!(boolean("has(workload.gpus)", &v));
        assert!(!boolean("has(workload.nonsense)", &v));
        // CEL's own has() on maps: a key holding null is present
        assert!(boolean("has(params.a)", &v));
        assert!(!boolean("has(params.b)", &v));
        assert_eq!(
            program("has(workload.estimate) ? workload.estimate.runtimeSeconds : 0.0")
                .eval_number(&v)
                .unwrap(),
            0.0
        );
        w.estimate = Some(EstimateView {
            runtime_seconds: 3600.0,
            samples: 12,
        });
        w.priority_class = Some("high".into());
        let v = vars(&w, &q, &params);
        assert!(boolean(
            "workload.estimate != null && has(workload.estimate)",
            &v
        ));
        assert!(boolean(
            "has(workload.priorityClass) && workload.priorityClass == 'high'",
            &v
        ));
        assert_eq!(
            program("workload.estimate != null ? workload.estimate.runtimeSeconds : 0.0")
                .eval_number(&v)
                .unwrap(),
            3600.0
        );
        assert_eq!(
            program("workload.estimate.samples")
                .eval_number(&v)
                .unwrap(),
            12.0
        );
    }

    #[test]
    fn a_syntax_error_has_its_1_based_line_and_column() {
        let error = compile(
            "workload.gpus <= 8 &&\n  workload.name ==* 'x'",
            &CelLimits::default(),
        )
        .unwrap_err();
        let CelError::Syntax {
            line,
            column,
            message,
        } = error
        else {
            panic!("{error:?}")
        };
        assert_eq!((line, column), (2, 19), "{message}");
        let error = compile("1 +", &CelLimits::default()).unwrap_err();
        assert!(
            matches!(
                error,
                CelError::Syntax {
                    line: 1,
                    column: 4,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn limits_and_unknown_variables_are_refused_at_load() {
        let limits = CelLimits::default();
        assert_eq!(
            compile(&"1".repeat(20_000), &limits).unwrap_err(),
            CelError::TooLong {
                bytes: 20_000,
                max: 16 * 1024
            }
        );
        assert!(matches!(
            compile(&vec!["1"; 40].join(" + "), &limits),
            Err(CelError::TooDeep { max: 32, .. })
        ));
        assert!(compile(&vec!["1"; 30].join(" + "), &limits).is_ok());
        assert!(matches!(
            compile(&format!("{}1{}", "(".repeat(200), ")".repeat(200)), &limits),
            Err(CelError::TooDeep { .. })
        ));
        assert!(matches!(
            compile("[1].all(a, [1].all(b, [1].all(c, true)))", &limits),
            Err(CelError::TooManyComprehensions { depth: 3, max: 2 })
        ));
        let big_list = format!("[{}]", vec!["1"; 300].join(","));
        assert_eq!(
            compile(&big_list, &limits).unwrap_err(),
            CelError::LiteralTooLarge {
                elements: 300,
                max: 256
            }
        );
        assert_eq!(
            compile("wrkload.gpus > 1", &limits).unwrap_err(),
            CelError::UnknownVariable {
                name: "wrkload".into()
            }
        );
        assert!(compile(
            "workload.podSets.exists(p, p.count > 1) && [1, 2].map(x, x * 2)[0] == 2",
            &limits
        )
        .is_ok());
        assert!(compile(
            "type(workload.gpus) == int && optional.of(1).hasValue()",
            &limits
        )
        .is_ok());
        assert!(
            matches!(compile("workload.podSets.all(p, q.count > 1)", &limits), Err(CelError::UnknownVariable { name }) if name == "q")
        );
    }

    #[test]
    fn wrong_result_types_and_runtime_errors_say_what_went_wrong() {
        let (w, q) = (workload(), queue());
        let params = Params::new(&serde_json::json!({}));
        let v = vars(&w, &q, &params);
        assert_eq!(
            program("workload.gpus").eval_bool(&v).unwrap_err(),
            EvalError::WrongType {
                expected: "a bool",
                got: "int".into()
            }
        );
        assert_eq!(
            program("workload.name").eval_number(&v).unwrap_err(),
            EvalError::WrongType {
                expected: "a number",
                got: "string".into()
            }
        );
        assert!(matches!(
            program("[1, 'a']").eval_string_list(&v),
            Err(EvalError::WrongType { .. })
        ));
        assert!(
            matches!(program("workload").eval_string(&v), Err(EvalError::WrongType { got, .. }) if got == "arbiter.Workload")
        );
        assert_eq!(
            program("1.0 / 0.0").eval_number(&v).unwrap_err(),
            EvalError::NotFinite
        );
        let runtime = |e: &str, v: &Vars| match program(e).eval_number(v) {
            Err(EvalError::Runtime(message)) => message,
            other => panic!("`{e}`: {other:?}"),
        };
        assert!(runtime("workload.labels['owner'] == 'x' ? 1 : 0", &v).contains("owner"));
        assert!(runtime("params.missing", &v).contains("missing"));
        assert!(runtime("workload.nonsense", &v).contains("nonsense"));
        assert!(runtime("double(flavor.nodes)", &v).contains("`flavor` is not available"));
        assert!(runtime("1 / 0", &v).contains("Division by zero"));
        let mixed = runtime("workload.priority * 1.5", &v);
        assert!(
            mixed.contains("Int(100)") && mixed.contains("Float(1.5)"),
            "{mixed}"
        );
        assert!(runtime("quantity('lots')", &v).contains("lots"));
        let no_params = Vars { params: None, ..v };
        assert!(runtime("params.boost", &no_params).contains("`params`"));
    }

    #[test]
    fn check_input_sizes_refuses_oversized_workloads() {
        let mut w = workload();
        assert_eq!(check_input_sizes(&w), Ok(()));
        w.pod_sets = vec![PodSetView::default(); MAX_POD_SETS + 1];
        assert!(
            matches!(check_input_sizes(&w), Err(EvalError::Runtime(m)) if m.contains("pod sets"))
        );
        let mut w = workload();
        w.labels = (0..=MAX_LABELS)
            .map(|i| (i.to_string(), String::new()))
            .collect();
        assert!(check_input_sizes(&w).is_err());
    }

    /// Whatever the expression, compiling and evaluating it returns; this
    /// test fails by panicking or overflowing the stack.
    #[test]
    fn nasty_expressions_never_panic() {
        let (mut w, q) = (workload(), queue());
        w.labels = (0..MAX_LABELS)
            .map(|i| (i.to_string(), "x".repeat(100)))
            .collect();
        let params = Params::new(&serde_json::json!({"nested": {"deeper": [1, 2, null]}}));
        let long_concat = vec!["'abcdefghij'"; 1000].join(" + ");
        let many = vec!["1"; 4000].join("+");
        let nasty: Vec<String> = [
            "1/0",
            "1 % 0",
            "1.0/0.0",
            "0.0/0.0",
            "-9223372036854775807 - 2",
            "9223372036854775807 * 2",
            "'a' * 3",
            "workload.name * 2",
            "workload.labels['nope']",
            "workload.estimate.runtimeSeconds",
            "workload.priorityClass.size()",
            "null.x",
            "params.missing",
            "params.nested.deeper[5]",
            "params.nested.deeper[-1]",
            "params.nested.deeper[2].x",
            "workload.podSets[99]",
            "workload.podSets['a']",
            "workload[1]",
            "workload['gpus']",
            "has(workload.estimate.samples)",
            "has(params.nested.x.y)",
            "workload.labels.map(k, workload.labels.map(j, k + j))",
            "size(workload)",
            "workload == workload",
            "workload < queue",
            "workload + 1",
            "-workload",
            "!workload",
            "workload ? 1 : 2",
            "workload in workload",
            "[workload, queue][0].gpus",
            "{workload: 1}",
            "{'a': 1, 'a': 2}",
            "type(workload)",
            "string(workload)",
            "double(workload.labels)",
            "int(1e300)",
            "uint(-1)",
            "quantity(1)",
            "quantity('9999999999999999Ei')",
            "optional.none().value()",
            "workload.?estimate.orValue(1)",
            "dyn(workload).gpus",
            "now.x",
            "cohort.name",
            "[1,2,3].all(x, x / 0 == 1)",
            "[].exists(x, x)",
            "'\\u0000'",
            "b'\\xff' + b'\\x00'",
            "1 +",
            ")",
            "",
            "((((((((((",
            "]]]]",
            "'unterminated",
            "\"\"\"",
            ".workload.gpus",
            "workload..gpus",
            "workload.podSets.exists_one(p, p.count == 4)",
            "workload.podSets.filter(p, p.count > 1).map(p, p.name)",
            "__result__",
            "@result",
            "workload.gpus.gpus",
            "1 in workload.gpus",
            "google.protobuf.Duration{seconds: 1}",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            long_concat,
            many,
            format!("{}1{}", "(".repeat(128), ")".repeat(128)),
            format!("{}1{}", "[".repeat(5000), "]".repeat(5000)),
            format!("{}true", "!".repeat(5000)),
            format!("{}1", "-".repeat(5000)),
            format!("workload{}", ".a".repeat(5000)),
            format!("[{}]", vec!["1"; 4000].join(",")),
            format!("{}1{}", "true ? ".repeat(1000), " : 0".repeat(1000)),
            vec!["true"; 4000].join(" && "),
            vec!["1 in [1]"; 500].join(" == "),
            "'x' + ".repeat(2000) + "'x'",
        ])
        .collect();
        let lenient = CelLimits {
            max_expression_bytes: 1 << 20,
            max_nesting: 64,
            max_comprehension_nesting: 3,
            max_literal_elements: 5000,
        };
        for expression in &nasty {
            for limits in [CelLimits::default(), lenient.clone()] {
                if let Ok(p) = compile(expression, &limits) {
                    let v = vars(&w, &q, &params);
                    let _ = p.eval_bool(&v);
                    let _ = p.eval_number(&v);
                    let _ = p.eval_string(&v);
                    let _ = p.eval_string_list(&v);
                    let _ = p.eval_number(&Vars::default());
                }
            }
        }
    }
}
