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
        /// The integration, as `apiVersion Kind`.
        integration: String,
        /// What is wrong with it.
        problem: String,
    },

    /// An expression of an integration (`field`: `spec.podSets`,
    /// `spec.finished.failed`, …) is not valid CEL.
    #[error(
        "job integration `{integration}`: the expression in `{field}` does not compile; \
         fix its CEL:\n{message}"
    )]
    Compile {
        /// The integration, as `apiVersion Kind`.
        integration: String,
        /// The field holding the expression.
        field: &'static str,
        /// The CEL compiler's message.
        message: String,
    },

    /// A `JobIntegration` manifest could not be read.
    #[error("JobIntegration manifest: {message}")]
    Manifest {
        /// Why it could not be read.
        message: String,
    },

    /// The job object itself is malformed (no name, bad metadata, wrong kind).
    #[error("{job}: {problem}")]
    Job {
        /// The job, as `Kind namespace/name`.
        job: String,
        /// What is wrong with it.
        problem: String,
    },

    /// The pod-set expression failed on this job (usually a missing field).
    #[error(
        "{job}: the pod-set expression of job integration `{integration}` failed: {message}; \
         check that the job has the fields the integration reads (or fix the expression)"
    )]
    Evaluate {
        /// The job, as `Kind namespace/name`.
        job: String,
        /// The integration, as `apiVersion Kind`.
        integration: String,
        /// The evaluation's error.
        message: String,
    },

    /// An expression reading the job's state (`spec.finished.*`,
    /// `spec.podsReady`) failed on this job.
    #[error("{job}: `{field}` of job integration `{integration}` failed: {message}")]
    Finished {
        /// The job, as `Kind namespace/name`.
        job: String,
        /// The integration, as `apiVersion Kind`.
        integration: String,
        /// The field holding the expression.
        field: &'static str,
        /// The evaluation's error.
        message: String,
    },

    /// The expression ran but found no pod set in the job.
    #[error(
        "{job}: job integration `{integration}` found no pod sets in it; \
         a job must describe at least one group of pods (e.g. a replica spec with a template)"
    )]
    NoPodSets {
        /// The job, as `Kind namespace/name`.
        job: String,
        /// The integration, as `apiVersion Kind`.
        integration: String,
    },

    /// A pod set, as the expression yielded it, has a bad field.
    #[error("{job}, pod set `{pod_set}`: `{field}` {problem}")]
    PodSet {
        /// The job, as `Kind namespace/name`.
        job: String,
        /// The pod set's name.
        pod_set: String,
        /// The pod set's field at fault.
        field: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A resource quantity is not a valid, non-negative Kubernetes quantity.
    #[error("{location} `{resource}`: {problem}")]
    Quantity {
        /// Where the quantity sits, e.g. ``container `trainer` resources.requests``.
        location: String,
        /// The resource name, e.g. `nvidia.com/gpu`.
        resource: String,
        /// What is wrong with the quantity.
        problem: String,
    },

    /// An error inside one pod set of a job (e.g. a bad quantity in its template).
    #[error("{job}, pod set `{pod_set}`: {cause}")]
    InPodSet {
        /// The job, as `Kind namespace/name`.
        job: String,
        /// The pod set's name.
        pod_set: String,
        /// The error inside it.
        cause: Box<JobError>,
    },
}
