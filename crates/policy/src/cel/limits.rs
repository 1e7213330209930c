//! What an expression may cost, and the input sizes that bound a run:
//! [`CelLimits`] checked at load (source length, nesting measured on the
//! tokens before parsing and on the tree after, comprehension nesting,
//! literal sizes) and the caps on a workload's collections checked before
//! each evaluation ([`check_input_sizes`]). Called by `compiler` and, for
//! the input caps, by the policy layer's `eval`. It never parses,
//! evaluates or recurses over a tree of unknown depth.

use cel::common::ast::Expr;
use cel::parser::Expression;

use super::ast::children;
use super::{CelError, EvalError};
use crate::view::WorkloadView;

/// Most labels, and most annotations, of a workload or tenant the engine
/// hands to a policy.
pub const MAX_LABELS: usize = 64;
/// Most pod sets of a workload (Kueue's own limit is 8).
pub const MAX_POD_SETS: usize = 16;
/// Most resources in one requests map.
pub const MAX_RESOURCES: usize = 32;

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

/// The checks made on the source before parsing: its length, its bracket
/// nesting and the token-level estimate of its depth ([`lexical_depth`]).
/// Returns the estimate, which a parser refusal reports as the depth.
pub(super) fn check_source(expression: &str, limits: &CelLimits) -> Result<usize, CelError> {
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
    if lexical_depth > parser_limit(limits) {
        return Err(CelError::TooDeep {
            depth: lexical_depth,
            max: limits.max_nesting,
        });
    }
    Ok(lexical_depth)
}

/// The recursion limit the parser gets: a source that passed
/// [`check_source`] never reaches it unless the estimate was exact.
pub(super) fn parser_limit(limits: &CelLimits) -> usize {
    limits.max_nesting.saturating_mul(LEXICAL_SLACK)
}

/// The checks made on the parsed tree, without recursion: its depth,
/// comprehension nesting and largest literal. A tree that passes is
/// shallow enough for the recursive walks of `ast` and `compiler`.
pub(super) fn check_tree(parsed: &Expression, limits: &CelLimits) -> Result<(), CelError> {
    let shape = measure(parsed);
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
    Ok(())
}

/// How many times `max_nesting` the token-level estimate of nesting may
/// reach before the source is refused unparsed ([`lexical_depth`]
/// over-estimates: `a.b + c.d` counts 3).
const LEXICAL_SLACK: usize = 4;

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
