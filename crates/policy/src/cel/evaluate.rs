//! Running a compiled program: one evaluation against one [`Vars`], the
//! result checked to be the type the hook wants (a bool, a finite number, a
//! string, a list of strings). Called by the policy layer's `eval` for every
//! CEL policy decision. It never panics on an expression or input: a
//! failure is an [`EvalError`], with cel's error turned into a message
//! about the variable or key that was missing.

use std::sync::Arc;

use arbiter_core::cel_bounds::metered;
use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelString, CelUInt};
use cel::common::value::Val;
use cel::{Context, ExecutionError, Value};

use super::resolve::{Scope, Vars};
use super::{CelProgram, EvalError, VARIABLES};

impl CelProgram {
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
        let (result, overrun) = metered(self.budget, || {
            Value::resolve_val(&self.expression, &context)
                .map_err(runtime_error)
                .and_then(|value| extract(value.as_ref()))
        });
        // An overrun decides, whatever the expression made of the error.
        match overrun {
            Some(overrun) => Err(EvalError::Budget(overrun.to_string())),
            None => result,
        }
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
