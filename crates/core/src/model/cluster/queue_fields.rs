//! Checking the fields of a ClusterQueue's and a LocalQueue's spec other
//! than names and quotas: durations, scheduling and retry policies,
//! reclaim, autoscaling, fungibility and preemption settings Kueue's API
//! server refuses together, a LocalQueue's resource bounds and estimation.
//! Each check reports every problem through the caller's `err` and gives
//! the value to use (the default where the field is bad); it never
//! resolves names or decides cohort membership. Called by `builder` for
//! every ClusterQueue and LocalQueue.

use crate::model::api::{self, FungibilityPolicy};
use crate::model::{Amount, Millis};

use super::checked::{
    AutoscalingPolicy, Cluster, Estimation, FlavorResource, Fungibility, HistoryWindow, Quota,
    ResourceBounds, RetryPolicy,
};

/// How the builder reports a problem: source, object, field, message.
pub(super) type ReportError<'e> = dyn FnMut(&str, String, String, String) + 'e;

/// A `flavorFungibility` policy as checked, `default` when it is absent.
pub(super) fn fungibility(policy: Option<FungibilityPolicy>, default: Fungibility) -> Fungibility {
    match policy {
        None => default,
        Some(FungibilityPolicy::TryNextFlavor) => Fungibility::TryNextFlavor,
        Some(_) => Fungibility::MayStopSearch,
    }
}

/// `text` parsed as a duration, `default` when absent; a bad one is
/// reported on `field` and read as `default`.
fn duration(
    text: &Option<String>,
    field: &str,
    default: Millis,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Millis {
    match text {
        None => default,
        Some(t) => Millis::parse(t).unwrap_or_else(|e| {
            err(source, object.to_string(), field.to_string(), e.to_string());
            default
        }),
    }
}

/// A ClusterQueue with no cohort may set no borrowingLimit or
/// lendingLimit: reports the first quota that does.
pub(super) fn check_limits_need_cohort(
    cluster: &Cluster,
    quotas: &[Option<Quota>],
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) {
    for (fr, quota) in quotas.iter().enumerate() {
        if let Some(q) = quota {
            if q.borrowing_limit.is_some() || q.lending_limit.is_some() {
                let (f, r) = cluster.split(FlavorResource(fr as u32));
                err(
                    source,
                    object.to_string(),
                    format!("spec.resourceGroups (flavor {}, resource {})", cluster.flavors[f.index()].name, cluster.resources[r.index()]),
                    "borrowingLimit/lendingLimit need a cohort to borrow from or lend to; set spec.cohort or remove the limit".into(),
                );
                break;
            }
        }
    }
}

/// How often adaptive weights are adjusted, when they are enabled: at
/// least the minimum interval (a shorter one is reported).
pub(super) fn adaptive_interval(
    scheduling: &api::Scheduling,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Option<Millis> {
    match &scheduling.adaptive_weights {
        Some(a) if a.enabled => {
            let field = "spec.scheduling.adaptiveWeights.adjustmentInterval";
            let interval = duration(
                &a.adjustment_interval,
                field,
                Millis::from_secs(300),
                source,
                object,
                err,
            );
            let min = crate::model::limits::MIN_ADJUSTMENT_INTERVAL;
            if interval < min {
                err(
                    source,
                    object.to_string(),
                    field.to_string(),
                    format!("is {interval}, shorter than the minimum {min}; weights adjusted more often than that only cost cycles"),
                );
            }
            Some(interval.max(min))
        }
        _ => None,
    }
}

/// The half-life of the decayed usage policies see (positive).
pub(super) fn usage_half_life(
    scheduling: &api::Scheduling,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Millis {
    duration(
        &scheduling
            .adaptive_weights
            .as_ref()
            .and_then(|a| a.usage_half_life.clone()),
        "spec.scheduling.adaptiveWeights.usageHalfLife",
        Millis::from_secs(3600),
        source,
        object,
        err,
    )
    .max(Millis(1))
}

/// `spec.retryPolicy`, its absent fields at their defaults.
pub(super) fn retry(
    retry: Option<&api::RetryPolicy>,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Option<RetryPolicy> {
    retry.map(|r| RetryPolicy {
        max_retries: r.max_retries.unwrap_or(RetryPolicy::DEFAULT.max_retries),
        backoff: duration(
            &r.backoff_duration,
            "spec.retryPolicy.backoffDuration",
            RetryPolicy::DEFAULT.backoff,
            source,
            object,
            err,
        ),
    })
}

/// The reclaim timeout, when `spec.resourceReclaim` is enabled (where it
/// is required).
pub(super) fn reclaim_timeout(
    reclaim: Option<&api::ResourceReclaim>,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Option<Millis> {
    match reclaim {
        Some(r) if r.enabled => match &r.reclaim_timeout {
            None => {
                err(
                    source,
                    object.to_string(),
                    "spec.resourceReclaim.reclaimTimeout".into(),
                    "required when resourceReclaim is enabled (e.g. `2h`)".into(),
                );
                None
            }
            t => Some(duration(
                t,
                "spec.resourceReclaim.reclaimTimeout",
                Millis::MAX,
                source,
                object,
                err,
            )),
        },
        _ => None,
    }
}

/// `spec.autoscaling`, when enabled: replica bounds in order and a
/// target utilization that is a percentage.
pub(super) fn autoscaling(
    autoscaling: Option<&api::Autoscaling>,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Option<AutoscalingPolicy> {
    match autoscaling {
        Some(a) if a.enabled => {
            if let (Some(min), Some(max)) = (a.min_replicas, a.max_replicas) {
                if min > max {
                    err(
                        source,
                        object.to_string(),
                        "spec.autoscaling".into(),
                        format!("minReplicas {min} is above maxReplicas {max}"),
                    );
                }
            }
            let target = a.target_utilization.unwrap_or(80.0);
            if !(target > 0.0 && target <= 100.0) {
                err(
                    source,
                    object.to_string(),
                    "spec.autoscaling.targetUtilization".into(),
                    format!("{target} is not a percentage in (0, 100]"),
                );
            }
            Some(AutoscalingPolicy {
                min_replicas: a.min_replicas,
                max_replicas: a.max_replicas,
                target_utilization: target,
            })
        }
        _ => None,
    }
}

/// `flavorFungibility.preference` is only allowed with both policies
/// `TryNextFlavor`, as Kueue's API server has it.
pub(super) fn check_preference(
    ff: &api::FlavorFungibility,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) {
    let when_can_borrow = fungibility(ff.when_can_borrow, Fungibility::MayStopSearch);
    let when_can_preempt = fungibility(ff.when_can_preempt, Fungibility::TryNextFlavor);
    if ff.preference.is_some()
        && (when_can_borrow, when_can_preempt)
            != (Fungibility::TryNextFlavor, Fungibility::TryNextFlavor)
    {
        // Kueue's API server refuses it the same way.
        err(
            source,
            object.to_string(),
            "spec.flavorFungibility.preference".into(),
            "may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor; set them or drop preference".into(),
        );
    }
}

/// Preempting while borrowing is reclaiming: `borrowWithinCohort` needs
/// `reclaimWithinCohort` other than `Never`, as Kueue's API server has it.
pub(super) fn check_borrow_within_cohort(
    preemption: &api::Preemption,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) {
    if preemption
        .borrow_within_cohort
        .as_ref()
        .is_some_and(|b| b.policy != api::BorrowWithinCohortPolicy::Never)
        && preemption.reclaim_within_cohort.unwrap_or_default() == api::ReclaimWithinCohort::Never
    {
        // Kueue's API server refuses it the same way.
        err(
            source,
            object.to_string(),
            "spec.preemption.borrowWithinCohort.policy".into(),
            "needs reclaimWithinCohort other than Never (preempting while borrowing is reclaiming); set reclaimWithinCohort or make the policy Never".into(),
        );
    }
}

/// A LocalQueue's bounds on one resource (`spec.resourceQuotas[i]`):
/// quantities exact and non-negative, min ≤ default ≤ max.
pub(super) fn resource_bounds(
    i: usize,
    rq: &api::LocalResourceQuota,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> ResourceBounds {
    let mut parse = |q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
                     what: &str| {
        q.as_ref().and_then(|q| match Amount::from_quantity(q) {
            Ok(a) if a.is_negative() => {
                err(
                    source,
                    object.to_string(),
                    format!("spec.resourceQuotas[{i}].{what}"),
                    format!("{a} is negative; bounds must be ≥ 0"),
                );
                None
            }
            Ok(a) => Some(a),
            Err(e) => {
                err(
                    source,
                    object.to_string(),
                    format!("spec.resourceQuotas[{i}].{what}"),
                    e.to_string(),
                );
                None
            }
        })
    };
    let b = ResourceBounds {
        resource: rq.name.clone(),
        min: parse(&rq.min, "min"),
        max: parse(&rq.max, "max"),
        default: parse(&rq.default, "default"),
    };
    if let (Some(min), Some(max)) = (b.min, b.max) {
        if min > max {
            err(
                source,
                object.to_string(),
                format!("spec.resourceQuotas[{i}]"),
                format!("min {min} is above max {max}"),
            );
        }
    }
    if let Some(d) = b.default {
        if b.min.is_some_and(|m| d < m) || b.max.is_some_and(|m| d > m) {
            err(
                source,
                object.to_string(),
                format!("spec.resourceQuotas[{i}].default"),
                format!("{d} lies outside [min, max]"),
            );
        }
    }
    b
}

/// A LocalQueue's runtime estimation, when enabled: its history window
/// (a count or a duration) and a confidence level in (0, 1].
pub(super) fn estimation(
    estimation: Option<&api::ResourceEstimation>,
    source: &str,
    object: &str,
    err: &mut ReportError<'_>,
) -> Option<Estimation> {
    match estimation {
        Some(e) if e.enabled => {
            let window = match &e.history_window {
                None => HistoryWindow::Count(100),
                Some(api::HistoryWindow::Count(n)) => HistoryWindow::Count(*n),
                Some(api::HistoryWindow::Duration(t)) => match Millis::parse(t) {
                    Ok(d) => HistoryWindow::Duration(d),
                    Err(e) => {
                        err(
                            source,
                            object.to_string(),
                            "spec.resourceEstimation.historyWindow".into(),
                            format!("{e}; or give a count of finished workloads"),
                        );
                        HistoryWindow::Count(100)
                    }
                },
            };
            let confidence = e.confidence_level.unwrap_or(0.9);
            if !(confidence > 0.0 && confidence <= 1.0) {
                err(
                    source,
                    object.to_string(),
                    "spec.resourceEstimation.confidenceLevel".into(),
                    format!("{confidence} is not in (0, 1]"),
                );
            }
            Some(Estimation { window, confidence })
        }
        _ => None,
    }
}
