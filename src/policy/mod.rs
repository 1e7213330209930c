//! Policies: the typed views every hook sees and the CEL engine that evaluates them.

pub mod cel;
pub mod view;
