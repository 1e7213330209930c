//! Policy evaluation: the sandboxed WebAssembly plugin runtime.

pub mod wasm;
