//! What an expression may cost, checked at load: [`CelLimits`] (source
//! length, nesting measured on the tokens before parsing and on the tree
//! after, comprehension nesting, literal sizes, the cost ceiling), and
//! [`parse`], which parses a source only once it has passed the checks the
//! recursive parser needs. Nothing here evaluates, or recurses over a tree
//! of unknown depth.

use cel::common::ast::Expr;
use cel::parser::Expression;
use cel::Env;

use super::walk::children;
use super::DEFAULT_BUDGET;

/// Why an expression was refused by its limits or did not parse.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum LimitError {
    /// The CEL parser refused the source.
    #[error("syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The source is longer than the limits allow.
    #[error("expression is {bytes} bytes long; at most {max} are allowed")]
    TooLong {
        /// Length of the source, in bytes.
        bytes: usize,
        /// Most bytes allowed.
        max: usize,
    },
    /// The expression nests deeper than the limits allow.
    #[error(
        "expression nests {depth} deep; at most {max} is allowed — split it into simpler terms"
    )]
    TooDeep {
        /// How deep it nests.
        depth: usize,
        /// Deepest nesting allowed.
        max: usize,
    },
    /// Comprehensions nest deeper than the limits allow.
    #[error(
        "comprehensions (all, exists, map, filter…) nest {depth} deep; at most {max} is allowed"
    )]
    TooManyComprehensions {
        /// How deep comprehensions nest.
        depth: usize,
        /// Deepest comprehension nesting allowed.
        max: usize,
    },
    /// A list or map literal has more entries than the limits allow.
    #[error("a list or map literal has {elements} elements; at most {max} are allowed")]
    LiteralTooLarge {
        /// Entries in the literal.
        elements: usize,
        /// Most entries allowed.
        max: usize,
    },
    /// The estimated worst-case cost is over the budget.
    #[error("{0}")]
    TooCostly(super::TooCostly),
}

/// What an expression may cost, checked at load (and, for `max_cost`, at run time).
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
    /// Most cost units one evaluation may spend: the ceiling of the
    /// estimate made at load and the run-time budget (default
    /// [`DEFAULT_BUDGET`]).
    pub max_cost: u64,
}

impl Default for CelLimits {
    fn default() -> Self {
        CelLimits {
            max_expression_bytes: 16 * 1024,
            max_nesting: 32,
            max_comprehension_nesting: 2,
            max_literal_elements: 256,
            max_cost: DEFAULT_BUDGET,
        }
    }
}

/// The checks made on the source before parsing: its length, its bracket
/// nesting and the token-level estimate of its depth ([`lexical_depth`]).
/// Returns the estimate, which a parser refusal reports as the depth.
pub(crate) fn check_source(expression: &str, limits: &CelLimits) -> Result<usize, LimitError> {
    let max = limits.max_expression_bytes.min(PARSER_MAX_BYTES);
    if expression.len() > max {
        return Err(LimitError::TooLong {
            bytes: expression.len(),
            max,
        });
    }
    let (brackets, lexical_depth) = lexical_depth(expression);
    if brackets > limits.max_nesting {
        return Err(LimitError::TooDeep {
            depth: brackets,
            max: limits.max_nesting,
        });
    }
    if lexical_depth > parser_limit(limits) {
        return Err(LimitError::TooDeep {
            depth: lexical_depth,
            max: limits.max_nesting,
        });
    }
    Ok(lexical_depth)
}

/// The longest source handed to the parser whatever the limits say: cel
/// 0.15's parser panics on a syntax error past column 65,535.
const PARSER_MAX_BYTES: usize = 65_535;

/// The recursion limit the parser gets: a source that passed
/// [`check_source`] never reaches it unless the estimate was exact.
pub(crate) fn parser_limit(limits: &CelLimits) -> usize {
    limits.max_nesting.saturating_mul(LEXICAL_SLACK)
}

/// Parses `source` in `env` once it has passed [`check_source`], then
/// checks the tree ([`check_tree`]). A tree that comes back is shallow
/// enough for recursive walks. Line and column of a syntax error are 1-based.
pub fn parse(env: &Env, source: &str, limits: &CelLimits) -> Result<Expression, LimitError> {
    let lexical_depth = check_source(source, limits)?;
    let parser = env
        .parser()
        .max_recursion_depth(u16::try_from(parser_limit(limits)).unwrap_or(u16::MAX));
    let parsed = parser.parse(source).map_err(|errors| {
        let first = errors.errors.first();
        match first {
            Some(e) if e.msg.starts_with("Recursion limit") => LimitError::TooDeep {
                depth: lexical_depth,
                max: limits.max_nesting,
            },
            // cel reports 1-based lines and columns
            _ => {
                let (line, column) = first.map_or((1, 1), |e| e.pos);
                LimitError::Syntax {
                    line: usize::try_from(line).unwrap_or(1).max(1),
                    column: usize::try_from(column).unwrap_or(1).max(1),
                    message: first
                        .map_or_else(|| "invalid expression".to_string(), |e| e.msg.clone()),
                }
            }
        }
    })?;
    check_tree(&parsed, limits)?;
    Ok(parsed)
}

/// The checks made on the parsed tree, without recursion: its depth,
/// comprehension nesting and largest literal. A tree that passes is
/// shallow enough for the recursive walks of `ast` and `compiler`.
pub(crate) fn check_tree(parsed: &Expression, limits: &CelLimits) -> Result<(), LimitError> {
    let shape = measure(parsed);
    if shape.depth > limits.max_nesting {
        return Err(LimitError::TooDeep {
            depth: shape.depth,
            max: limits.max_nesting,
        });
    }
    if shape.comprehension_depth > limits.max_comprehension_nesting {
        return Err(LimitError::TooManyComprehensions {
            depth: shape.comprehension_depth,
            max: limits.max_comprehension_nesting,
        });
    }
    if shape.literal_elements > limits.max_literal_elements {
        return Err(LimitError::LiteralTooLarge {
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
struct TreeShape {
    depth: usize,
    comprehension_depth: usize,
    literal_elements: usize,
}

/// Depth, comprehension nesting and largest literal of a tree of any depth,
/// without recursion.
fn measure(root: &Expression) -> TreeShape {
    let mut shape = TreeShape::default();
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
