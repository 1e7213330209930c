//! Arbiter's pure core: the manifest model (`model`), job integrations as
//! data (`jobs`), the scheduler (`scheduler`) and the bounds every CEL
//! evaluation runs under (`cel_bounds`). It never reads a clock, a
//! file or the network, never spawns a thread and never blocks: drivers
//! (the simulator, the operator) feed it events and the current time and
//! carry out what it decides. Its dependency tree holds no async runtime,
//! no WebAssembly engine, no Kubernetes client and no file watcher; a test
//! (`tests/dependencies.rs` at the workspace root) keeps it so.

#![warn(missing_docs)]

pub mod cel_bounds;
pub mod cel_json;
pub mod jobs;
pub mod model;
pub mod scheduler;
