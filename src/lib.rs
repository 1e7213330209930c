//! Arbiter: queues and admits GPU training work under per-tenant quotas.
//! See ARCHITECTURE.md for the map.

pub mod cli;
pub mod jobs;
pub mod model;
