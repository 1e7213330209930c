//! Arbiter: queues and admits GPU training work under per-tenant quotas.
//! See ARCHITECTURE.md for the map.

pub mod cli;
pub mod core;
pub mod jobs;
pub mod model;
pub mod policy;
pub mod sim;
