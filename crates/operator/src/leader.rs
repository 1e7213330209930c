//! Leader election on a `coordination.k8s.io` Lease (kube-lease-manager):
//! every replica watches and serves webhooks; only the one holding the
//! lease runs the driver's loop, so only it writes jobs, Workloads and
//! queue status. A replica that loses the lease stops its loop at once and
//! reports it, so the process can exit and come back as a follower (as
//! controller-runtime's managers do); the new leader starts from the API
//! (the core's restore), so nothing is admitted twice.
//!
//! A leader cut off from the API cannot learn that it lost the lease: the
//! lease manager's requests fail or hang, and it keeps saying "leading"
//! while another replica takes the expired lease. So the leader also
//! fences itself ([`fence`]): it reads the Lease back, and once it could
//! not confirm its hold up to shortly before the lease could expire it
//! stops as if the lease were lost — before any other replica may take it.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
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
    let manager = LeaseManagerBuilder::new(client.clone(), &options.name)
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
        led = fence(client.clone(), options) => {
            tracing::warn!(%lease, led_s = led.as_secs(),
                "the leader lease could not be confirmed before it could expire (the API unreachable?); stopping as if it were lost");
            Ended::LostLease
        }
    };
    set(false);
    // Dropping the receiver makes the lease task release the lease (when
    // it still holds it) and end — unless the API does not answer, when
    // the lease expires on its own.
    drop(leading);
    let abort = task.abort_handle();
    match tokio::time::timeout(RELEASE_WAIT, task).await {
        Ok(Ok(Err(e))) => {
            tracing::warn!(%lease, error = %e, "releasing the leader lease failed; it expires on its own")
        }
        Ok(Err(e)) => tracing::warn!(%lease, error = %e, "the lease task failed"),
        Ok(Ok(Ok(_))) => tracing::info!(%lease, "leader lease released"),
        Err(_) => {
            abort.abort();
            tracing::warn!(%lease, "the API did not answer the lease's release; it expires on its own")
        }
    }
    Ok(ended)
}

/// How long a stopping leader waits for its lease's release.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Resolves, with how long this replica led, once it could not confirm it
/// still holds the lease: each read of the Lease naming this replica as
/// holder confirms the hold until its `renewTime` plus the lease's
/// duration less a quarter of its grace (the margin for the clocks and
/// the other replicas' reads), and the Lease is read every quarter of the
/// grace (at most every second) — so a renewal, due a whole grace before
/// the expiry, is seen well before the hold runs out. A read that fails,
/// hangs or names another holder confirms nothing. Started as the lease is
/// taken, so the first hold counts from now.
async fn fence(client: Client, options: &LeaseOptions) -> Duration {
    let api: Api<Lease> = Api::namespaced(client, &options.namespace);
    let grace = Duration::from_secs(options.grace_seconds.max(1));
    let every = (grace / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    let hold = Duration::from_secs(options.duration_seconds).saturating_sub(grace / 4);
    let since = Instant::now();
    let mut held_until = since + hold;
    loop {
        let deadline = tokio::time::Instant::from_std(held_until);
        let read = async {
            tokio::time::sleep(every).await;
            api.get_opt(&options.name).await
        };
        let lease = tokio::select! {
            _ = tokio::time::sleep_until(deadline) => return since.elapsed(),
            read = read => read,
        };
        let Ok(Some(lease)) = lease else { continue };
        let Some(spec) = lease.spec else { continue };
        if spec.holder_identity.as_deref() != Some(options.identity.as_str()) {
            continue;
        }
        let Some(renewed) = spec.renew_time else {
            continue;
        };
        // What is left of the hold as of now, by the wall clock the lease
        // manager wrote `renewTime` with.
        let left = (SystemTime::from(renewed.0) + hold)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        held_until = held_until.max(Instant::now() + left);
    }
}
