//! The simulator (DESIGN §5–6): replays a scenario — cluster manifests,
//! node pools and a stream of jobs — through the real scheduler core and
//! policies in virtual time, and reports what happened. `scenario` turns
//! loaded manifests into a run, `driver` runs it, `report` is the JSON
//! contract, `table` and `plot` render it for people; `policies` picks and
//! loads the bundles in force.

pub mod driver;
pub mod files;
pub mod generate;
pub mod plot;
pub mod policies;
pub mod report;
pub mod scenario;
pub mod table;
