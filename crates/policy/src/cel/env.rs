//! The CEL environment every policy runs in, built once per process: the
//! standard library, `quantity(string)` and `@arbiter.has`, the function a
//! `has()` on an optional view field is rewritten to. Used by `compiler`
//! (programs keep the environment they were compiled in). Functions here
//! never panic on any argument: a bad one is an `ExecutionError`.

use std::sync::{Arc, OnceLock};

use cel::common::types::{
    CelBool, CelDouble, CelNull, CelOptional, CelString, DYN_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError};

use arbiter_core::cel_bounds;
use arbiter_core::model::Amount;

/// The environment every policy runs in: the standard library and
/// `quantity()`. Built once per process.
pub(super) fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    Arc::clone(ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // A fresh stdlib declares neither name: these cannot conflict.
        let declared = env
            .add_overload("quantity", "quantity_string", vec![STRING_TYPE], quantity)
            .and_then(|()| {
                env.add_overload(HAS_SET, "has_set", vec![DYN_TYPE, STRING_TYPE], has_set)
            })
            .and_then(|()| cel_bounds::register(&mut env));
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
pub(super) const HAS_SET: &str = "@arbiter.has";

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
