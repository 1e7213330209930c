//! The policy engine: bundles of CEL and WebAssembly policies, and their hot reload.

pub mod reload;
