//! Errors of the job integrations, written for the platform engineer who
//! has to fix the job or the integration.
//!
//! Every message names the job (`Kind namespace/name`) or the integration
//! (`apiVersion Kind`), the pod set and the field at fault, and says what a
//! valid value looks like. Nothing here decides anything; `jobs` and its
//! submodules build these values, and the simulator, CLI and operator print
//! them.

/// Why a job (or an integration) could not be turned into pod sets.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum JobError {
    /// An integration's description is unusable (bad hold path, duplicate kind…).
    #[error("job integration `{integration}`: {problem}")]
    InvalidIntegration {
        integration: String,
        problem: String,
    },

    /// An expression of an integration (`field`: `spec.podSets`,
    /// `spec.finished.failed`, …) is not valid CEL.
    #[error(
        "job integration `{integration}`: the expression in `{field}` does not compile; \
         fix its CEL:\n{message}"
    )]
    Compile {
        integration: String,
        field: &'static str,
        message: String,
    },

    /// A `JobIntegration` manifest could not be read.
    #[error("JobIntegration manifest: {message}")]
    Manifest { message: String },

    /// The job object itself is malformed (no name, bad metadata, wrong kind).
    #[error("{job}: {problem}")]
    Job { job: String, problem: String },

    /// The pod-set expression failed on this job (usually a missing field).
    #[error(
        "{job}: the pod-set expression of job integration `{integration}` failed: {message}; \
         check that the job has the fields the integration reads (or fix the expression)"
    )]
    Evaluate {
        job: String,
        integration: String,
        message: String,
    },

    /// An expression reading the job's state (`spec.finished.*`,
    /// `spec.podsReady`) failed on this job.
    #[error("{job}: `{field}` of job integration `{integration}` failed: {message}")]
    Finished {
        job: String,
        integration: String,
        field: &'static str,
        message: String,
    },

    /// The expression ran but found no pod set in the job.
    #[error(
        "{job}: job integration `{integration}` found no pod sets in it; \
         a job must describe at least one group of pods (e.g. a replica spec with a template)"
    )]
    NoPodSets { job: String, integration: String },

    /// A pod set, as the expression yielded it, has a bad field.
    #[error("{job}, pod set `{pod_set}`: `{field}` {problem}")]
    PodSet {
        job: String,
        pod_set: String,
        field: String,
        problem: String,
    },

    /// A resource quantity is not a valid, non-negative Kubernetes quantity.
    #[error("{location} `{resource}`: {problem}")]
    Quantity {
        /// Where the quantity sits, e.g. ``container `trainer` resources.requests``.
        location: String,
        resource: String,
        problem: String,
    },

    /// An error inside one pod set of a job (e.g. a bad quantity in its template).
    #[error("{job}, pod set `{pod_set}`: {cause}")]
    InPodSet {
        job: String,
        pod_set: String,
        cause: Box<JobError>,
    },
}
