//! The platform bundle directories of `--policies` (a mounted ConfigMap
//! volume, say): each loaded as a platform bundle (one saying it is a
//! tenant's is refused) and, when it is a directory, watched on its own
//! thread (`reload::DirWatcher`), the driver woken after each swap. Never
//! on the driver's task; a directory that does not load keeps the bundle
//! in force. Called by [`Bundles`](super::Bundles).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbiter_policy::bundle::{self, Bundle, LoadOptions};
use arbiter_policy::reload::{self, DirWatcher, ReloadOutcome, Reloadable, WatchError};
use arbiter_policy::wasm::Runtime;
use tokio::sync::Notify;

/// A platform bundle directory, loaded; a tenant bundle there is refused.
pub(super) fn load(dir: &Path, runtime: &Runtime) -> Result<Bundle, String> {
    let bundle =
        bundle::load_path(dir, runtime, &LoadOptions::default()).map_err(|e| e.to_string())?;
    match &bundle.tenant {
        Some(tenant) => Err(format!(
            "{}: bundle.yaml says spec.tenant: {tenant}, but --policies takes platform bundles; \
             ship {tenant}'s bundle as a ConfigMap labelled {} in namespace {tenant}",
            bundle.source,
            bundle::CONFIGMAP_LABEL
        )),
        None => Ok(bundle),
    }
}

/// Watches each directory of `dirs` (a file is loaded once, not watched),
/// reloading its source in `sources` (the same order) on change and
/// notifying `wake` after each swap.
pub(super) fn watch(
    dirs: &[PathBuf],
    sources: &[Arc<Reloadable<Bundle>>],
    runtime: &Arc<Runtime>,
    wake: &Arc<Notify>,
) -> Result<Vec<DirWatcher>, WatchError> {
    let mut watchers = Vec::new();
    for (dir, source) in dirs.iter().zip(sources) {
        if !dir.is_dir() {
            tracing::info!(file = %dir.display(), "a ConfigMap manifest file given as --policies is loaded once, not watched");
            continue;
        }
        let (path, source) = (dir.clone(), source.clone());
        let (runtime, wake) = (runtime.clone(), wake.clone());
        watchers.push(DirWatcher::spawn(
            dir,
            reload::DEFAULT_DEBOUNCE,
            move || {
                let outcome = source.reload_with(|| load(&path, &runtime));
                if matches!(outcome, ReloadOutcome::Swapped { .. }) {
                    wake.notify_one();
                }
            },
        )?);
    }
    Ok(watchers)
}
