//! A checked, compiled plugin: what identical module bytes share
//! ([`Compiled`]: the pre-linked module, the hooks it exports, whether it
//! is a reactor, the limits it has been probed under) and the [`Plugin`] a
//! bundle holds under its own name, with the weight fields it declared; and
//! the static checks of a module against ABI v1 — its imports (only
//! `arbiter.log` and WASI p1) and the type of every export it must or may
//! have. Used by `runtime` at load and by `instance`
//! per call. Nothing here runs guest code.

use std::fmt;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::{ExternType, FuncType, InstancePre, Module};

use super::host::CallState;
use super::{Hook, Limits, LoadError, WEIGHT_FIELDS_EXPORT};

/// A loaded plugin: a compiled, checked module under the name a bundle gave it.
pub struct Plugin {
    pub(super) name: String,
    pub(super) compiled: Arc<Compiled>,
    /// What `arbiter_weight_fields` declared, when the module exports it.
    pub(super) weight_fields: Option<Vec<String>>,
}

/// What identical module bytes share, whoever loaded them.
pub(super) struct Compiled {
    pub(super) digest: String,
    pub(super) pre: InstancePre<CallState>,
    pub(super) hooks: Vec<Hook>,
    pub(super) reactor: bool,
    /// It exports `arbiter_weight_fields` (checked to have its ABI type).
    pub(super) declares_fields: bool,
    /// The limits its load probe passed under, and what it declared then
    /// (the same every time: a call depends only on module and input).
    pub(super) probes: Mutex<Vec<(Limits, Option<Vec<String>>)>>,
}

impl Plugin {
    /// The names `arbiter_weight_fields` returned at load, if it is exported.
    pub fn weight_fields(&self) -> Option<&[String]> {
        self.weight_fields.as_deref()
    }

    /// Runs the load probe (`_initialize` for reactors,
    /// `arbiter_abi_version`, `arbiter_weight_fields`) under `limits`,
    /// unless it already passed under them: for another policy that names
    /// the same module with other limits.
    pub fn probe(&self, limits: &Limits) -> Result<(), LoadError> {
        self.compiled.probe(&self.name, limits).map(drop)
    }

    /// The name the bundle gave this module.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hex sha256 of the module bytes.
    pub fn digest(&self) -> &str {
        &self.compiled.digest
    }

    pub fn exports_hook(&self, hook: Hook) -> bool {
        self.compiled.hooks.contains(&hook)
    }
    #[cfg(test)]
    pub(super) fn shares_module_with(&self, other: &Plugin) -> bool {
        Arc::ptr_eq(&self.compiled, &other.compiled)
    }
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("digest", &self.compiled.digest)
            .field("hooks", &self.compiled.hooks)
            .finish()
    }
}

/// What the static checks found a module to export besides the required
/// `memory`, `arbiter_abi_version` and `arbiter_alloc`.
pub(super) struct Exports {
    /// The hooks it implements, in [`Hook::ALL`] order.
    pub(super) hooks: Vec<Hook>,
    /// It exports `_initialize`, to be run before each call.
    pub(super) reactor: bool,
}

/// Checks a module's imports and the exports ABI v1 requires or knows (but
/// `arbiter_weight_fields`, checked after linking: [`declares_weight_fields`]).
pub(super) fn check_exports(name: &str, module: &Module) -> Result<Exports, LoadError> {
    check_imports(name, module)?;
    check_export(name, module, "memory", |ty| match ty {
        ExternType::Memory(memory) if !memory.is_64() => Ok(()),
        ExternType::Memory(_) => Err("a 64-bit memory".to_string()),
        other => Err(describe_extern(other)),
    })?;
    check_func_export(name, module, "arbiter_abi_version", "() -> i32")?;
    check_func_export(name, module, "arbiter_alloc", "(i32) -> i32")?;
    let mut hooks = Vec::new();
    for hook in Hook::ALL {
        if module.get_export(hook.export_name()).is_some() {
            check_func_export(name, module, hook.export_name(), "(i32, i32) -> i64")?;
            hooks.push(hook);
        }
    }
    let reactor = match module.get_export("_initialize") {
        Some(_) => {
            check_func_export(name, module, "_initialize", "() -> ()")?;
            true
        }
        None => false,
    };
    Ok(Exports { hooks, reactor })
}

/// Whether the module exports `arbiter_weight_fields`, checked to have its
/// ABI type.
pub(super) fn declares_weight_fields(name: &str, module: &Module) -> Result<bool, LoadError> {
    match module.get_export(WEIGHT_FIELDS_EXPORT) {
        Some(_) => {
            check_func_export(name, module, WEIGHT_FIELDS_EXPORT, "() -> i64")?;
            Ok(true)
        }
        None => Ok(false),
    }
}

fn check_imports(name: &str, module: &Module) -> Result<(), LoadError> {
    for import in module.imports() {
        let allowed = match import.module() {
            "arbiter" => import.name() == "log",
            "wasi_snapshot_preview1" => true,
            _ => false,
        };
        if !allowed {
            return Err(LoadError::ForbiddenImport {
                module: name.to_string(),
                import: format!("{}.{}", import.module(), import.name()),
            });
        }
    }
    Ok(())
}

fn check_export(
    name: &str,
    module: &Module,
    export: &str,
    check: impl FnOnce(&ExternType) -> Result<(), String>,
) -> Result<(), LoadError> {
    let Some(ty) = module.get_export(export) else {
        return Err(LoadError::MissingExport {
            module: name.to_string(),
            export: export.to_string(),
        });
    };
    check(&ty).map_err(|found| LoadError::ExportType {
        module: name.to_string(),
        export: export.to_string(),
        expected: "a 32-bit memory".to_string(),
        found,
    })
}

fn check_func_export(
    name: &str,
    module: &Module,
    export: &str,
    signature: &str,
) -> Result<(), LoadError> {
    let Some(ty) = module.get_export(export) else {
        return Err(LoadError::MissingExport {
            module: name.to_string(),
            export: export.to_string(),
        });
    };
    let found = describe_extern(&ty);
    if found == format!("a function {signature}") {
        return Ok(());
    }
    Err(LoadError::ExportType {
        module: name.to_string(),
        export: export.to_string(),
        expected: format!("a function {signature}"),
        found,
    })
}

fn describe_extern(ty: &ExternType) -> String {
    match ty {
        ExternType::Func(func) => format!("a function {}", describe_func(func)),
        ExternType::Global(_) => "a global".to_string(),
        ExternType::Table(_) => "a table".to_string(),
        ExternType::Memory(_) => "a memory".to_string(),
        ExternType::Tag(_) => "a tag".to_string(),
    }
}

/// `(i32, i32) -> i64`, `() -> ()`.
fn describe_func(func: &FuncType) -> String {
    let params: Vec<String> = func.params().map(|p| p.to_string()).collect();
    let results: Vec<String> = func.results().map(|r| r.to_string()).collect();
    let results = match results.as_slice() {
        [one] => one.clone(),
        _ => format!("({})", results.join(", ")),
    };
    format!("({}) -> {results}", params.join(", "))
}

pub(super) fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
