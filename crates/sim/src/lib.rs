//! The simulator (docs/design.md §5–6): replays a scenario — cluster manifests,
//! node pools and a stream of jobs — through the real scheduler core and
//! policies in virtual time, and reports what happened. `scenario` turns
//! loaded manifests into a run, `driver` runs it, `report` is the JSON
//! contract, `table` and `plot` render it for people; `policies` runs it
//! with a policy engine and reports what the policies did. `live` makes a
//! scenario of what was read from a live cluster (its running workloads
//! start the run admitted) and `diff` compares two runs of it. `trace` replays
//! a GPU-cluster trace (Alibaba's openb) the way the FGD paper measures
//! placement.

pub mod diff;
pub mod driver;
pub mod files;
pub mod generate;
pub mod live;
pub mod plot;
pub mod policies;
pub mod report;
pub mod scenario;
pub mod table;
pub mod trace;
