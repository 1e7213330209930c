//! The complexity of a module, checked against caps before it is compiled:
//! Cranelift has no compile budget, and its time grows faster than linearly
//! with a function's locals and size (one function of 30,000 locals, 474 KB,
//! compiles for minutes). So a module is parsed (not compiled) first and
//! refused if it defines more functions, a function with more locals or a
//! larger body than [`ComplexityCaps`] allow — [`PLATFORM_COMPLEXITY_CAPS`] for platform
//! bundles, [`TENANT_COMPLEXITY_CAPS`] for tenant ones. The caps sit well above
//! what real plugins have (BENCHMARKS.md "Fuel"): `shortest-first` (Rust,
//! 166 KB) defines 505 functions, at most 35 locals (152 in a debug build)
//! and a largest body of 6 KB; the C SDK's example (`examples/plugins/c`)
//! at `-O0` has 550 locals in one function; the Go one (2 MB) defines 1,389
//! functions of at most 17 locals and 12 KB. At the caps one function
//! compiles here in about 0.2 s (2,000 live locals) or 3.6 s (a 512 KiB
//! body), and the dearest modules
//! the caps and size limits allow — all big bodies — in 35 s (8 MiB,
//! platform) and 6 s (2 MiB, tenant), within the compile budgets of
//! `runtime`.
//! Used by `runtime` at load; it runs no guest code and never panics on
//! bytes that are not a module (the compiler then says why).

use wasmtime::wasmparser::{Parser, Payload};

use super::LoadError;

/// Caps on what one module may define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComplexityCaps {
    /// Functions the module defines (imports not counted).
    pub functions: u64,
    /// Locals one function declares (parameters not counted: WebAssembly
    /// allows at most 1,000 of those).
    pub locals_per_function: u64,
    /// Bytes of one function's body.
    pub body_bytes: u64,
    /// Locals all functions declare together.
    pub total_locals: u64,
}

/// The caps of a platform bundle's modules.
pub const PLATFORM_COMPLEXITY_CAPS: ComplexityCaps = ComplexityCaps {
    functions: 50_000,
    locals_per_function: 2_000,
    body_bytes: 512 << 10,
    total_locals: 1_000_000,
};

/// The caps of a tenant bundle's modules.
pub const TENANT_COMPLEXITY_CAPS: ComplexityCaps = ComplexityCaps {
    functions: 20_000,
    locals_per_function: 1_000,
    body_bytes: 128 << 10,
    total_locals: 250_000,
};

/// What [`measure`] found in a module.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Complexity {
    pub(super) functions: u64,
    /// The most locals one function declares, and its index among the defined functions.
    pub(super) max_locals: (u64, u64),
    /// The largest body, and its function's index among the defined functions.
    pub(super) max_body: (u64, u64),
    pub(super) total_locals: u64,
}

/// Measures `bytes`; `None` if they do not parse as a module (the compiler
/// then reports why, in its own words).
pub(super) fn measure(bytes: &[u8]) -> Option<Complexity> {
    let mut measured = Complexity::default();
    let mut index = 0u64;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.ok()? {
            Payload::CodeSectionStart { count, .. } => measured.functions = u64::from(count),
            Payload::CodeSectionEntry(body) => {
                let mut locals = 0u64;
                let mut reader = body.get_locals_reader().ok()?;
                for _ in 0..reader.get_count() {
                    let (count, _) = reader.read().ok()?;
                    locals = locals.saturating_add(u64::from(count));
                }
                let size = body.range().len() as u64;
                if locals > measured.max_locals.0 {
                    measured.max_locals = (locals, index);
                }
                if size > measured.max_body.0 {
                    measured.max_body = (size, index);
                }
                measured.total_locals = measured.total_locals.saturating_add(locals);
                index += 1;
            }
            // A component, or a module nested in one: the compiler refuses it.
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => return None,
            _ => {}
        }
    }
    Some(measured)
}

/// Refuses a module whose complexity exceeds `caps`, naming the module, the
/// measure, its value and the cap.
pub(super) fn check(name: &str, bytes: &[u8], caps: &ComplexityCaps) -> Result<(), LoadError> {
    let Some(measured) = measure(bytes) else {
        return Ok(());
    };
    let refuse = |what: String, found: u64, cap: u64| LoadError::TooComplex {
        module: name.to_string(),
        what,
        found,
        cap,
    };
    if measured.functions > caps.functions {
        return Err(refuse(
            "the number of functions it defines".to_string(),
            measured.functions,
            caps.functions,
        ));
    }
    let (locals, at) = measured.max_locals;
    if locals > caps.locals_per_function {
        return Err(refuse(
            format!("the locals of its function {at} (counting defined functions from 0)"),
            locals,
            caps.locals_per_function,
        ));
    }
    let (size, at) = measured.max_body;
    if size > caps.body_bytes {
        return Err(refuse(
            format!("the body of its function {at} (counting defined functions from 0), in bytes,"),
            size,
            caps.body_bytes,
        ));
    }
    if measured.total_locals > caps.total_locals {
        return Err(refuse(
            "the locals of all its functions together".to_string(),
            measured.total_locals,
            caps.total_locals,
        ));
    }
    Ok(())
}
