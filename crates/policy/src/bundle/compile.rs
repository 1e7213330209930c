//! Compiling one bundle's policies ([`PolicyCompiler`]): each checked
//! against what its hook and the bundle allow, its limits and params read,
//! its CEL compiled or its WebAssembly module read, pinned, checked and
//! compiled once per file however many policies name it. `load` drives it
//! policy by policy.

use super::*;

/// Checks and compiles a bundle's policies one by one, sharing what they
/// share: where the files are, the runtime, the bundle's tenant, and the
/// modules loaded so far (each compiled once, by file name, however many
/// policies name it).
pub(super) struct PolicyCompiler<'a> {
    pub(super) files: &'a Files<'a>,
    pub(super) runtime: &'a Runtime,
    pub(super) source: &'a str,
    pub(super) tenant: Option<&'a str>,
    pub(super) modules: BTreeMap<String, Arc<Plugin>>,
}

/// An error about policy `p` of the bundle loaded from `source`.
pub(super) fn policy_error(source: &str, p: &PolicySpec, message: String) -> BundleError {
    BundleError::Policy {
        at: source.to_string(),
        policy: p.name.clone(),
        message,
    }
}

impl PolicyCompiler<'_> {
    /// One policy checked against what its hook and the bundle allow, its
    /// limits and params read, and its program compiled.
    pub(super) fn compile(&mut self, p: &PolicySpec) -> Result<Policy, BundleError> {
        let source = self.source;
        let fail = |message: String| policy_error(source, p, message);
        let hook = hooks::descriptor(p.hook);
        if let Some(ns) = self.tenant {
            if !hook.tenant {
                return Err(fail(format!(
                    "hook {} is not allowed in a tenant bundle (spec.tenant: {ns}); tenant bundles hold only weight and admission policies",
                    p.hook
                )));
            }
            if p.matches.namespaces.iter().any(|n| n != ns) {
                return Err(fail(format!(
                    "match.namespaces names another namespace; a tenant bundle applies only to {ns}"
                )));
            }
        }
        let (default, max) = if self.tenant.is_some() {
            (Limits::TENANT, Limits::TENANT_MAX)
        } else {
            (Limits::PLATFORM, Limits::PLATFORM_MAX)
        };
        let limits = limits(p.limits.as_ref(), default, max).map_err(fail)?;
        let params = p
            .config
            .clone()
            .or_else(|| p.wasm.as_ref().and_then(|w| w.config.clone()))
            .unwrap_or(serde_json::Value::Object(Default::default()));
        let program = match (&p.cel, &p.wasm) {
            (Some(c), None) => compile_cel(p.hook, c, &params, &limits).map_err(fail)?,
            (None, Some(w)) => self.wasm(p, w, limits)?,
            (Some(_), Some(_)) => {
                return Err(fail("has both cel and wasm; give exactly one".into()))
            }
            (None, None) => return Err(fail("has neither cel nor wasm; give exactly one".into())),
        };
        if p.order_by_placement && !hook.order_by_placement {
            return Err(fail(
                "orderByPlacement orders a flavor policy's answer; remove it from this policy or make it a flavor policy".into(),
            ));
        }
        Ok(Policy {
            order_by_placement: p.order_by_placement,
            name: p.name.clone(),
            hook: p.hook,
            matches: p.matches.clone(),
            program,
            cel_params: Params::new(&params),
            params,
            failure_policy: p.failure_policy,
            mode: p.mode,
            limits,
        })
    }

    /// A WASM policy's program: its module (loaded, or the one already
    /// loaded under that name) probed under this policy's limits, checked
    /// against its pin, exporting the hook, with the weight fields it declares.
    fn wasm(
        &mut self,
        p: &PolicySpec,
        w: &WasmSpec,
        limits: Limits,
    ) -> Result<Program, BundleError> {
        let plugin = match self.modules.get(&w.module) {
            Some(plugin) => plugin.clone(),
            None => {
                let plugin = self.module(p, w, limits)?;
                self.modules.insert(w.module.clone(), plugin.clone());
                plugin
            }
        };
        let source = self.source;
        let fail = |message: String| policy_error(source, p, message);
        // Another policy may name the module under other limits.
        plugin
            .probe(&limits)
            .map_err(|e| fail(format!("wasm.module {}: {e}", w.module)))?;
        check_pin(w, plugin.digest()).map_err(fail)?;
        if !plugin.exports_hook(p.hook) {
            return Err(fail(format!(
                "{} does not export {}, which hook {} needs",
                w.module,
                p.hook.export_name(),
                p.hook
            )));
        }
        let weight_fields = match plugin.weight_fields() {
            Some(names) => WeightFields::parse(names).map_err(|e| {
                fail(format!(
                    "wasm.module {}: its arbiter_weight_fields {e}; fix the \
                     declaration in the plugin (plugin-sdk/ABI.md)",
                    w.module
                ))
            })?,
            None => WeightFields::ALL,
        };
        Ok(Program::Wasm {
            plugin,
            module: w.module.clone(),
            weight_fields,
        })
    }

    /// Reads a module named by a policy (a file inside the bundle, up to
    /// the bundle's module cap), checks its pin on the bytes and compiles
    /// it under the bundle's own load limits.
    fn module(
        &self,
        p: &PolicySpec,
        w: &WasmSpec,
        limits: Limits,
    ) -> Result<Arc<Plugin>, BundleError> {
        let source = self.source;
        let fail = |message: String| policy_error(source, p, message);
        if w.module.contains("..") || w.module.starts_with('/') {
            return Err(fail(format!(
                "wasm.module {:?} must be a file name inside the bundle",
                w.module
            )));
        }
        let cap = if self.tenant.is_some() {
            FileCap::TenantModule
        } else {
            FileCap::Module
        };
        let bytes = self.files.read(
            &w.module,
            cap,
            &format!("policy {}: wasm.module {}", p.name, w.module),
        )?;
        // The pin is checked on the bytes: a module that is not the one
        // pinned is never compiled or run.
        check_pin(w, &hex(&Sha256::digest(&bytes))).map_err(fail)?;
        // Shape caps, compile budget and load probe: the bundle's own
        // (tenant ones for a tenant bundle).
        let load_limits = match self.tenant {
            Some(_) => LoadLimits::tenant(limits),
            None => LoadLimits::platform(limits),
        };
        // A compile error or trap may quote the module's own names.
        self.runtime
            .load(&w.module, &bytes, &load_limits)
            .map_err(|e| {
                fail(format!(
                    "wasm.module {}: {}",
                    w.module,
                    crate::text::clean(&e.to_string(), crate::text::MAX_ERROR_BYTES)
                ))
            })
    }
}

/// A module's `sha256` pin against its digest; the message never shows the module's bytes.
fn check_pin(w: &WasmSpec, digest: &str) -> Result<(), String> {
    match &w.sha256 {
        Some(pin) if !pin.eq_ignore_ascii_case(digest) => Err(format!(
            "wasm.sha256 pins {pin} but {} has sha256 {digest}; update the pin if the module changed on purpose",
            w.module
        )),
        _ => Ok(()),
    }
}

fn limits(spec: Option<&LimitsSpec>, default: Limits, max: Limits) -> Result<Limits, String> {
    let mut limits = default;
    if let Some(spec) = spec {
        if let Some(ms) = spec.timeout_ms {
            let timeout = Duration::from_millis(ms);
            if ms == 0 || timeout > max.timeout {
                return Err(format!(
                    "limits.timeoutMs {ms} must be between 1 and {}",
                    max.timeout.as_millis()
                ));
            }
            limits.timeout = timeout;
        }
        if let Some(mib) = spec.memory_mi_b {
            let bytes = (mib as usize).saturating_mul(1 << 20);
            if mib == 0 || bytes > max.memory_bytes {
                return Err(format!(
                    "limits.memoryMiB {mib} must be between 1 and {}",
                    max.memory_bytes >> 20
                ));
            }
            limits.memory_bytes = bytes;
        }
    }
    Ok(limits)
}

/// Compiles a CEL policy, its scalar `params` folded in, with a budget per
/// evaluation of its `limits.timeoutMs` in cost units
/// ([`cel_bounds::UNITS_PER_MS`]).
fn compile_cel(
    hook: Hook,
    spec: &CelSpec,
    params: &serde_json::Value,
    limits: &Limits,
) -> Result<Program, String> {
    let millis = u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX);
    let limits = CelLimits {
        max_cost: millis.saturating_mul(cel_bounds::UNITS_PER_MS),
        ..CelLimits::default()
    };
    let expression = cel::compile_with(&spec.expression, &limits, params)
        .map_err(|e| format!("cel.expression: {e}"))?;
    let message = match &spec.message_expression {
        Some(m) if hooks::descriptor(hook).verdict => Some(Box::new(
            cel::compile_with(m, &limits, params)
                .map_err(|e| format!("cel.messageExpression: {e}"))?,
        )),
        Some(_) => {
            return Err(format!(
                "cel.messageExpression is only for admission policies, not {hook}"
            ))
        }
        None => None,
    };
    if spec.retryable.is_some() && !hooks::descriptor(hook).verdict {
        return Err(format!(
            "cel.retryable is only for admission policies, not {hook}"
        ));
    }
    Ok(Program::Cel {
        expression,
        message,
        retryable: spec.retryable.unwrap_or(true),
    })
}
