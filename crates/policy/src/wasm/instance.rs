//! One hook call, ABI v1's "life of a call": a fresh instance in its own
//! store under the policy's fuel budget, its wall-clock backstop (epoch
//! ticks) and memory cap, `_initialize` for reactors, the request written
//! through `arbiter_alloc`, `arbiter_<hook>` called and the response copied
//! out within bounds; and the load probe (`_initialize`,
//! `arbiter_abi_version`, `arbiter_weight_fields`) under the same limits.
//! Called by the policy layer through [`Plugin::call`] and by `runtime` at
//! load. Whatever the guest does — trap, loop, exhaust memory, return
//! garbage — becomes a [`CallError`]; it never parses the response as JSON.

use std::time::Duration;

use wasmtime::{Store, Trap};
use wasmtime_wasi::I32Exit;

use super::host::{charge_host_calls, CallState};
use super::module::{Compiled, Plugin};
use super::{
    CallError, CallOutput, Hook, Limits, LoadError, ABI_VERSION, MAX_RESPONSE_BYTES, TICK,
    WEIGHT_FIELDS_EXPORT,
};

/// Distinct limits a module's probe results are kept for.
const MAX_PROBES: usize = 16;

impl Plugin {
    /// One evaluation batch: a fresh instance, `request` written through
    /// `arbiter_alloc`, `arbiter_<hook>` called, the response copied out.
    pub fn call(
        &self,
        hook: Hook,
        request: &[u8],
        limits: &Limits,
    ) -> Result<CallOutput, CallError> {
        if !self.exports_hook(hook) {
            return Err(CallError::MissingExport(hook.export_name().to_string()));
        }
        let mut run = self.compiled.start(limits)?;
        let response = run.call_hook(hook, request);
        let (logs, dropped_logs) = run.store.data_mut().take_logs();
        let fuel_used = limits
            .fuel()
            .saturating_sub(run.store.get_fuel().unwrap_or(0));
        Ok(CallOutput {
            response: response?,
            logs,
            dropped_logs,
            fuel_used,
        })
    }
}

/// One live instance in its own store, for the length of one call.
struct Run {
    store: Store<CallState>,
    instance: wasmtime::Instance,
}

impl Compiled {
    /// A fresh instance under `limits`, with `_initialize` run for reactors.
    fn start(&self, limits: &Limits) -> Result<Run, CallError> {
        let engine = self.pre.module().engine();
        let mut store = Store::new(engine, CallState::new(limits));
        store.limiter(CallState::limiter);
        // Fuel is always on in this engine, so this cannot fail.
        store
            .set_fuel(limits.fuel())
            .map_err(|e| CallError::Instantiate(format!("{e:#}")))?;
        store.call_hook(charge_host_calls);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(deadline_ticks(limits.backstop()));
        let instance = match self.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(e) => {
                return Err(match classify(&e, store.data()) {
                    CallError::Trap(message) => CallError::Instantiate(message),
                    other => other,
                })
            }
        };
        let mut run = Run { store, instance };
        if self.reactor {
            let init = run.func::<(), ()>("_initialize")?;
            init.call(&mut run.store, ())
                .map_err(|e| classify(&e, run.store.data()))?;
        }
        Ok(run)
    }

    /// Calls `arbiter_weight_fields` and reads the JSON list of names it returns.
    fn weight_fields(&self, limits: &Limits) -> Result<Vec<String>, String> {
        let mut run = self.start(limits).map_err(|e| e.to_string())?;
        let declare = run
            .func::<(), i64>(WEIGHT_FIELDS_EXPORT)
            .map_err(|e| e.to_string())?;
        let packed = declare
            .call(&mut run.store, ())
            .map_err(|e| classify(&e, run.store.data()).to_string())?;
        let bytes = run
            .response(WEIGHT_FIELDS_EXPORT, packed)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "it returned {:?}, not a JSON list of strings: {e}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )
        })
    }

    /// The load probe under `limits`: a fresh instance (`_initialize` run
    /// for reactors), `arbiter_abi_version` checked, and the declared weight
    /// fields read; remembered per distinct `limits`.
    pub(super) fn probe(
        &self,
        name: &str,
        limits: &Limits,
    ) -> Result<Option<Vec<String>>, LoadError> {
        let lock = || self.probes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, fields)) = lock().iter().find(|(probed, _)| probed == limits) {
            return Ok(fields.clone());
        }
        let found = self
            .abi_version(limits)
            .map_err(|source| LoadError::AbiCheck {
                module: name.to_string(),
                source,
            })?;
        if found != ABI_VERSION {
            return Err(LoadError::AbiVersion {
                module: name.to_string(),
                found,
            });
        }
        let fields = match self.declares_fields {
            true => Some(
                self.weight_fields(limits)
                    .map_err(|reason| LoadError::WeightFields {
                        module: name.to_string(),
                        reason,
                    })?,
            ),
            false => None,
        };
        let mut probes = lock();
        if probes.len() >= MAX_PROBES {
            probes.clear();
        }
        probes.push((*limits, fields.clone()));
        Ok(fields)
    }

    fn abi_version(&self, limits: &Limits) -> Result<i32, CallError> {
        let mut run = self.start(limits)?;
        let version = run.func::<(), i32>("arbiter_abi_version")?;
        version
            .call(&mut run.store, ())
            .map_err(|e| classify(&e, run.store.data()))
    }
}

impl Run {
    fn func<P, R>(&mut self, name: &str) -> Result<wasmtime::TypedFunc<P, R>, CallError>
    where
        P: wasmtime::WasmParams,
        R: wasmtime::WasmResults,
    {
        self.instance
            .get_typed_func::<P, R>(&mut self.store, name)
            .map_err(|_| CallError::MissingExport(name.to_string()))
    }

    fn call_hook(&mut self, hook: Hook, request: &[u8]) -> Result<String, CallError> {
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| CallError::MissingExport("memory".to_string()))?;
        let len = i32::try_from(request.len()).map_err(|_| CallError::OutOfMemory)?;
        let alloc = self.func::<i32, i32>("arbiter_alloc")?;
        let ptr = alloc
            .call(&mut self.store, len)
            .map_err(|e| classify(&e, self.store.data()))?;
        memory
            .write(&mut self.store, ptr as u32 as usize, request)
            .map_err(|_| {
                CallError::BadOutput(format!(
                    "arbiter_alloc({len}) returned {}, but {len} bytes there lie outside \
                     the {}-byte memory",
                    ptr as u32,
                    memory.data_size(&self.store)
                ))
            })?;
        let entry = self.func::<(i32, i32), i64>(hook.export_name())?;
        let packed = entry
            .call(&mut self.store, (ptr, len))
            .map_err(|e| classify(&e, self.store.data()))?;
        let bytes = self.response(hook.export_name(), packed)?;
        String::from_utf8(bytes).map_err(|e| {
            CallError::BadOutput(format!(
                "{} returned a response that is not UTF-8 (bad byte at offset {})",
                hook.export_name(),
                e.utf8_error().valid_up_to()
            ))
        })
    }

    /// Copies out the `(out_ptr << 32) | out_len` result of `export`.
    fn response(&mut self, export: &str, packed: i64) -> Result<Vec<u8>, CallError> {
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| CallError::MissingExport("memory".to_string()))?;
        let out_ptr = (packed as u64 >> 32) as usize;
        let out_len = (packed as u64 & 0xffff_ffff) as usize;
        if out_len > MAX_RESPONSE_BYTES {
            return Err(CallError::BadOutput(format!(
                "{export} returned a {out_len}-byte response; at most {MAX_RESPONSE_BYTES} \
                 bytes are accepted"
            )));
        }
        let data = memory.data(&self.store);
        out_ptr
            .checked_add(out_len)
            .and_then(|end| data.get(out_ptr..end))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| {
                CallError::BadOutput(format!(
                    "{export} returned the response at {out_ptr}..+{out_len}, outside the \
                     {}-byte memory",
                    data.len()
                ))
            })
    }
}

/// Turns a failed guest call into the one thing a policy author must fix.
fn classify(error: &wasmtime::Error, state: &CallState) -> CallError {
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => CallError::OutOfFuel {
            fuel: state.fuel_budget(),
        },
        Some(Trap::Interrupt) => CallError::Timeout,
        _ if state.memory_denied() => CallError::OutOfMemory,
        Some(trap) => CallError::Trap(trap.to_string()),
        None => match error.downcast_ref::<I32Exit>() {
            Some(exit) => CallError::Trap(format!("the plugin called proc_exit({})", exit.0)),
            None => CallError::Trap(format!("{error:#}")),
        },
    }
}

/// Epoch ticks for `timeout` (a call's backstop), plus one: the epoch may
/// advance right after the deadline is set.
pub(super) fn deadline_ticks(timeout: Duration) -> u64 {
    let ticks = timeout.as_nanos().div_ceil(TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)
}
