//! The run-time budget: [`instrument`] rewrites a compiled tree so that
//! every comprehension iteration, and every `+` that may build a string or
//! a list, passes through the function [`CHARGE`]; [`metered`] runs one
//! evaluation with a budget in a thread-local meter that function draws
//! from. When the budget runs out, or a value built is larger than
//! [`MAX_BUILT_STRING`] bytes or [`MAX_BUILT_LIST`] entries, the charge
//! fails, every later charge of that evaluation fails at once (so each
//! comprehension still running stops at its next iteration), and
//! [`metered`] reports the [`Overrun`] whatever the expression made of the
//! error. The count depends only on the expression and its input, never on
//! the machine.
//!
//! The rewrite keeps what cel 0.15 optimises: a `map`/`filter` step
//! (`@result + [x]`, guarded or not) is charged on its guard or its
//! element, an `all`/`exists` fold on its loop condition, so neither the
//! in-place append nor the deferred errors of `&&`/`||` folds change.

use std::cell::Cell;

use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, LiteralValue};
use cel::common::types::{CelBytes, CelInt, CelList, CelMap, CelString, DYN_TYPE, INT_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::Expression;
use cel::{Env, ExecutionError};

use super::estimate::ValueBound;
use super::walk::{children, children_mut};
use super::{MAX_BUILT_LIST, MAX_BUILT_STRING, STRING_BYTES_PER_UNIT};

/// The function the rewritten tree calls: `@arbiter.charge(value, units)`
/// returns `value` after drawing `units` plus the value's weight.
pub(crate) const CHARGE: &str = "@arbiter.charge";

/// Why an evaluation was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overrun {
    /// It spent more than its budget of cost units.
    Budget {
        /// The budget, in cost units.
        budget: u64,
    },
    /// It built a string longer than [`MAX_BUILT_STRING`] bytes.
    String {
        /// Length of the string it tried to build, in bytes.
        bytes: usize,
    },
    /// It built a list or map of more than [`MAX_BUILT_LIST`] entries.
    List {
        /// Entries of the list or map it tried to build.
        entries: usize,
    },
}

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Overrun::Budget { budget } => write!(
                f,
                "the evaluation exceeded its budget of {budget} cost units (iterations and \
                 bytes built); iterate over less, or raise limits.timeoutMs"
            ),
            Overrun::String { bytes } => write!(
                f,
                "the evaluation built a string of {bytes} bytes; at most {MAX_BUILT_STRING} \
                 are allowed"
            ),
            Overrun::List { entries } => write!(
                f,
                "the evaluation built a list or map of {entries} entries; at most \
                 {MAX_BUILT_LIST} are allowed"
            ),
        }
    }
}

#[derive(Clone, Copy)]
struct Meter {
    remaining: u64,
    budget: u64,
    overrun: Option<Overrun>,
}

thread_local! {
    static METER: Cell<Option<Meter>> = const { Cell::new(None) };
}

/// Declares [`CHARGE`] in `env`, and the string functions every CEL of
/// Arbiter's has beside the standard library: `lowerAscii()`,
/// `upperAscii()` and `trim()`, which build nothing longer than their input
/// (the `strings` extension's `replace`, `join`, `split`, `format`… are left
/// out: `replace` alone makes a cost exponential in the source's length).
/// Call once on each environment whose programs go through [`instrument`].
pub fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(CHARGE, "arbiter_charge", vec![DYN_TYPE, INT_TYPE], charge)?;
    cel::add_member_overload!(env, fn lower_ascii: (CelString) -> CelString)?;
    cel::add_member_overload!(env, fn upper_ascii: (CelString) -> CelString)?;
    cel::add_member_overload!(env, fn trim: (CelString) -> CelString)?;
    Ok(())
}

fn lower_ascii(this: &CelString<'_>) -> CelString<'static> {
    this.inner().to_ascii_lowercase().into()
}

fn upper_ascii(this: &CelString<'_>) -> CelString<'static> {
    this.inner().to_ascii_uppercase().into()
}

fn trim(this: &CelString<'_>) -> CelString<'static> {
    this.inner().trim().to_string().into()
}

/// Runs `evaluate` with a budget of `budget` units; returns its result and
/// the overrun that stopped it, if one did. Outside `metered` (a program
/// evaluated without a meter) charges are free.
pub fn metered<R>(budget: u64, evaluate: impl FnOnce() -> R) -> (R, Option<Overrun>) {
    let outer = METER.with(|m| {
        m.replace(Some(Meter {
            remaining: budget,
            budget,
            overrun: None,
        }))
    });
    let result = evaluate();
    let meter = METER.with(|m| m.replace(outer));
    (result, meter.and_then(|m| m.overrun))
}

fn charge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut args = args.into_iter();
    let (Some(value), Some(units), None) = (args.next(), args.next(), args.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    let units = units
        .downcast_ref::<CelInt>()
        .map_or(1, |u| u64::try_from(*u.inner()).unwrap_or(1));
    let stopped = METER.with(|cell| {
        let mut meter = cell.get()?;
        if meter.overrun.is_none() {
            let weight = weight(value.as_ref(), meter.remaining);
            let cost = units.saturating_add(weight.units);
            meter.overrun = weight.overrun.or(if cost > meter.remaining {
                Some(Overrun::Budget {
                    budget: meter.budget,
                })
            } else {
                meter.remaining -= cost;
                None
            });
            cell.set(Some(meter));
        }
        meter.overrun
    });
    match stopped {
        None => Ok(value),
        Some(overrun) => Err(ExecutionError::function_error("budget", overrun)),
    }
}

struct Weight {
    units: u64,
    overrun: Option<Overrun>,
}

/// What building `value` cost: a unit per entry of a list or map and per
/// [`STRING_BYTES_PER_UNIT`] bytes of a string, its entries counted too;
/// the walk stops once it passes `limit`. A value over the size caps is an
/// overrun.
fn weight(value: &dyn Val, limit: u64) -> Weight {
    let mut units = 0u64;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        if units > limit {
            break;
        }
        if let Some(s) = value.downcast_ref::<CelString>() {
            let bytes = s.inner().len();
            if bytes > MAX_BUILT_STRING {
                return overrun(Overrun::String { bytes });
            }
            units += bytes as u64 / STRING_BYTES_PER_UNIT;
        } else if let Some(b) = value.downcast_ref::<CelBytes>() {
            let bytes = b.inner().len();
            if bytes > MAX_BUILT_STRING {
                return overrun(Overrun::String { bytes });
            }
            units += bytes as u64 / STRING_BYTES_PER_UNIT;
        } else if let Some(list) = value.downcast_ref::<CelList>() {
            let entries = list.inner().len();
            if entries > MAX_BUILT_LIST {
                return overrun(Overrun::List { entries });
            }
            units += entries as u64;
            stack.extend(list.inner().iter().map(|v| v.as_ref()));
        } else if let Some(map) = value.downcast_ref::<CelMap>() {
            let entries = map.inner().len();
            if entries > MAX_BUILT_LIST {
                return overrun(Overrun::List { entries });
            }
            units += entries as u64;
            stack.extend(map.inner().values().map(|v| v.as_ref()));
        }
    }
    Weight {
        units,
        overrun: None,
    }
}

fn overrun(overrun: Overrun) -> Weight {
    Weight {
        units: 0,
        overrun: Some(overrun),
    }
}

/// Rewrites `node` so that evaluating it draws on the meter: each
/// comprehension iteration is charged the nodes of its condition and step,
/// and each `_+_` not known to add numbers is charged the weight of what it
/// built. `variable` gives the shapes of the variables, to tell which are
/// numbers. Call once, on a tree [`super::limits::check_tree`] has measured.
pub(crate) fn instrument(node: &mut Expression, variable: &dyn Fn(&str) -> Option<ValueBound>) {
    Instrument {
        variable,
        bound: Vec::new(),
    }
    .node(node);
}

struct Instrument<'a> {
    variable: &'a dyn Fn(&str) -> Option<ValueBound>,
    /// Comprehension variables in scope: never known to be numbers.
    bound: Vec<String>,
}

impl Instrument<'_> {
    fn node(&mut self, node: &mut Expression) {
        match &mut node.expr {
            Expr::Comprehension(c) => {
                let units = 1 + body_nodes(&c.loop_cond) + body_nodes(&c.loop_step);
                self.node(&mut c.iter_range);
                self.node(&mut c.accu_init);
                let outer = self.bound.len();
                self.bound.push(c.accu_var.clone());
                self.bound.push(c.iter_var.clone());
                self.bound.extend(c.iter_var2.clone());
                self.node(&mut c.result);
                self.node(&mut c.loop_cond);
                match append_step(c) {
                    Some((Some(guard), element)) => {
                        self.node(element);
                        self.node(guard);
                        wrap(guard, units);
                    }
                    Some((None, element)) => {
                        self.node(element);
                        wrap(element, units);
                    }
                    None => {
                        self.node(&mut c.loop_step);
                        wrap(&mut c.loop_cond, units);
                    }
                }
                self.bound.truncate(outer);
            }
            Expr::Call(call) if is_add(call) => {
                let numbers = call.args.iter().all(|a| self.scalar(a));
                children_mut(node, |child| self.node(child));
                if !numbers {
                    wrap(node, 1);
                }
            }
            _ => children_mut(node, |child| self.node(child)),
        }
    }

    /// Whether `node` can only be a number, bool or null (or an error).
    fn scalar(&self, node: &Expression) -> bool {
        match &node.expr {
            Expr::Literal(LiteralValue::String(_) | LiteralValue::Bytes(_)) => false,
            Expr::Literal(_) => true,
            Expr::Ident(name) => {
                let name = name.strip_prefix('.').unwrap_or(name);
                let mut path = name.split('.');
                let root = path.next().unwrap_or(name);
                if self.bound.iter().any(|b| b == root) {
                    return false;
                }
                let Some(mut shape) = (self.variable)(root) else {
                    return false;
                };
                for field in path {
                    match shape.fields.as_ref().and_then(|f| f.get(field)) {
                        Some(s) => shape = s.clone(),
                        None => return false,
                    }
                }
                shape.scalar
            }
            Expr::Call(call) => match call.func_name.as_str() {
                "_-_" | "_*_" | "_/_" | "_%_" | "-_" | "size" | "int" | "uint" | "double" => true,
                "_+_" => call.args.iter().all(|a| self.scalar(a)),
                _ => false,
            },
            _ => false,
        }
    }
}

fn is_add(call: &CallExpr) -> bool {
    call.func_name == "_+_" && call.target.is_none() && call.args.len() == 2
}

/// Whether `c` is a `map`/`filter` step, `@result + [x]` (`Some(false)`)
/// or `g ? @result + [x] : @result` (`Some(true)`), exactly as cel 0.15
/// recognises it to append in place.
pub(super) fn append_step_guarded(c: &ComprehensionExpr) -> Option<bool> {
    let accu = c.accu_var.as_str();
    let is_accu = |e: &Expression| matches!(&e.expr, Expr::Ident(name) if name == accu);
    if !is_accu(&c.result) || !matches!(c.loop_cond.expr, Expr::Literal(_)) {
        return None;
    }
    let appends = |e: &Expression| match &e.expr {
        Expr::Call(call) if is_add(call) => {
            is_accu(&call.args[0])
                && matches!(&call.args[1].expr, Expr::List(list) if list.elements.len() == 1)
        }
        _ => false,
    };
    match &c.loop_step.expr {
        Expr::Call(call) if call.func_name == "_?_:_" && call.target.is_none() => {
            match call.args.as_slice() {
                [_, step, otherwise] if is_accu(otherwise) && appends(step) => Some(true),
                _ => None,
            }
        }
        _ if appends(&c.loop_step) => Some(false),
        _ => None,
    }
}

/// The guard (if any) and the appended element of a `map`/`filter` step
/// ([`append_step_guarded`]).
fn append_step(c: &mut ComprehensionExpr) -> Option<(Option<&mut Expression>, &mut Expression)> {
    let guarded = append_step_guarded(c)?;
    fn element(add: &mut Expression) -> Option<&mut Expression> {
        match &mut add.expr {
            Expr::Call(call) => match &mut call.args[1].expr {
                Expr::List(list) => list.elements.first_mut(),
                _ => None,
            },
            _ => None,
        }
    }
    if !guarded {
        return Some((None, element(&mut c.loop_step)?));
    }
    match &mut c.loop_step.expr {
        Expr::Call(call) => {
            let [guard, step, _] = call.args.as_mut_slice() else {
                return None;
            };
            Some((Some(guard), element(step)?))
        }
        _ => None,
    }
}

/// `node` becomes `@arbiter.charge(node, units)`.
fn wrap(node: &mut Expression, units: u64) {
    let id = node.id;
    let inner = std::mem::take(node);
    *node = Expression {
        id,
        expr: Expr::Call(CallExpr {
            func_name: CHARGE.to_string(),
            target: None,
            args: vec![
                inner,
                Expression {
                    id,
                    expr: Expr::Literal(LiteralValue::Int(CelInt::from(
                        i64::try_from(units).unwrap_or(i64::MAX),
                    ))),
                },
            ],
        }),
    };
}

/// The nodes of a loop body evaluated on every iteration, a nested
/// comprehension counted as one (it charges its own iterations).
pub(super) fn body_nodes(node: &Expression) -> u64 {
    match &node.expr {
        Expr::Comprehension(_) => 1,
        other => 1 + children(other).into_iter().map(body_nodes).sum::<u64>(),
    }
}
