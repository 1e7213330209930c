//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager):
//! every replica watches and serves webhooks; only the one holding the
//! lease runs the driver's loop, so only it writes jobs, Workloads and
//! queue status. A replica that loses the lease stops its loop at once and
//! reports it, so the process can exit and come back as a follower (as
//! controller-runtime's managers do); the new leader starts from the API
//! (the core's restore), so nothing is admitted twice.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};

use crate::admin::{AdminState, OperatorMetrics};
use crate::driver::Driver;

/// Which Lease, and how it is held.
#[derive(Clone, Debug)]
pub struct LeaseOptions {
    pub namespace: String,
    pub name: String,
    /// This replica's name in the Lease's `holderIdentity` (the Pod's name).
    pub identity: String,
    /// How long a lease not renewed stays held, in seconds.
    pub duration_seconds: u64,
    /// How long before expiry the holder renews, in seconds.
    pub grace_seconds: u64,
}

/// Why the driver stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// `shutdown` resolved (the lease was released for the next leader).
    Shutdown,
    /// Another replica holds the lease now; this one must stop writing.
    LostLease,
}

/// Waits for the lease, then runs `driver` while holding it, until
/// `shutdown` resolves or the lease is lost. While waiting the replica
/// is a follower (`AdminState::following`, `arbiter_leader` 0).
pub async fn run_as_leader(
    client: Client,
    options: &LeaseOptions,
    driver: Driver,
    admin: Option<(Arc<AdminState>, OperatorMetrics)>,
    shutdown: impl Future<Output = ()>,
) -> Result<Ended, LeaseManagerError> {
    let manager = LeaseManagerBuilder::new(client, &options.name)
        .with_namespace(&options.namespace)
        .with_identity(&options.identity)
        .with_duration(options.duration_seconds)
        .with_grace(options.grace_seconds)
        .with_field_manager(format!("arbiter-{}", options.identity))
        .build()
        .await?;
    let (mut leading, task) = manager.watch().await;
    let set = |lead: bool| {
        if let Some((state, metrics)) = &admin {
            state.following.store(!lead, Ordering::Relaxed);
            metrics.set_leader(lead);
        }
    };
    set(false);
    let lease = format!("{}/{}", options.namespace, options.name);
    tracing::info!(%lease, identity = %options.identity, "following: waiting for the leader lease");
    let mut shutdown = std::pin::pin!(shutdown);
    while !*leading.borrow_and_update() {
        tokio::select! {
            changed = leading.changed() => {
                if changed.is_err() {
                    // The lease task ended; its result says why.
                    return match task.await {
                        Ok(Err(e)) => Err(e),
                        _ => Ok(Ended::LostLease),
                    };
                }
            }
            _ = &mut shutdown => {
                drop(leading);
                let _ = task.await;
                return Ok(Ended::Shutdown);
            }
        }
    }
    set(true);
    tracing::info!(%lease, identity = %options.identity, "leading: this replica schedules and writes");
    let lost = async {
        loop {
            if leading.changed().await.is_err() || !*leading.borrow_and_update() {
                return;
            }
        }
    };
    let ended = tokio::select! {
        _ = driver.run(&mut shutdown) => Ended::Shutdown,
        _ = lost => Ended::LostLease,
    };
    set(false);
    // Dropping the receiver makes the lease task release the lease (when
    // it still holds it) and end.
    drop(leading);
    match task.await {
        Ok(Err(e)) => {
            tracing::warn!(%lease, error = %e, "releasing the leader lease failed; it expires on its own")
        }
        Err(e) => tracing::warn!(%lease, error = %e, "the lease task failed"),
        Ok(Ok(_)) => tracing::info!(%lease, "leader lease released"),
    }
    Ok(ended)
}
