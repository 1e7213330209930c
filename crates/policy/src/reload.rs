//! Hot reload of what the policy engine builds from a bundle. [`Reloadable`]
//! keeps the value in force behind an atomic pointer swap: a scheduling cycle
//! that took [`Reloadable::current`] holds one whole value until it lets go,
//! while [`Reloadable::reload_with`] builds the next one and swaps it in only
//! if every step succeeded. [`DirWatcher`] watches a bundle directory (a plain
//! one, or a ConfigMap volume with the kubelet's `..data` symlink swap) and
//! calls back once changes have settled. This module never reads, parses or
//! judges a bundle (the caller's `build` closure does: parse → validate →
//! compile → run the bundle's tests), never lets a failed build replace the
//! last good value, and never panics on a filesystem error. The drivers (the
//! operator, `arbiter` commands that watch a bundle) call it, wiring the
//! watcher's callback to `reload_with`. A `Reloadable` told to
//! [`report_to`](Reloadable::report_to) metrics records every reload result
//! and the value in force there, until it is told to
//! [`stop_reporting`](Reloadable::stop_reporting) (its source is gone).

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jiff::Timestamp;
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::metrics::{BundleMetrics, PolicyMetrics};
pub use super::status::{BundleStatus, Identity, Loaded, ReloadOutcome};

/// The value in force and its reload history. Readers never wait: `current`
/// is a lock-free load. Reloads are serialised among themselves.
pub struct Reloadable<T> {
    current: ArcSwap<T>,
    state: Mutex<State>,
    reloading: Mutex<()>,
}

/// What a reload updates besides the value: the history, and the metrics it reports to.
struct State {
    status: BundleStatus,
    metrics: Option<BundleMetrics>,
}

impl<T: Loaded> Reloadable<T> {
    pub fn new(initial: T) -> Self {
        let status = BundleStatus {
            identity: initial.identity(),
            loaded_at: Timestamp::now(),
            generation: 0,
            attempts: 0,
            last_error: None,
            last_attempt_at: None,
        };
        Self {
            current: ArcSwap::from_pointee(initial),
            state: Mutex::new(State {
                status,
                metrics: None,
            }),
            reloading: Mutex::new(()),
        }
    }

    /// Reports the value in force, and from now on every reload result, to
    /// `metrics` with label `bundle` (the source: directory or ConfigMap). A
    /// `Reloadable` reports to one place: if it already does, this keeps
    /// that, adds no series and returns `false`.
    pub fn report_to(&self, metrics: &PolicyMetrics, bundle: &str) -> bool {
        let _no_reload_meanwhile = lock(&self.reloading);
        let mut state = lock(&self.state);
        if state.metrics.is_some() {
            return false;
        }
        let mut metrics = metrics.bundle(bundle);
        metrics.in_force(&state.status.identity, state.status.loaded_at);
        metrics.last_succeeded(state.status.last_error.is_none());
        state.metrics = Some(metrics);
        true
    }

    /// The source is gone (its ConfigMap deleted): the series saying what it
    /// has in force are removed from the metrics it reports to, and it
    /// reports nowhere from now on. Its reload counters stay.
    pub fn stop_reporting(&self) {
        let _no_reload_meanwhile = lock(&self.reloading);
        if let Some(mut metrics) = lock(&self.state).metrics.take() {
            metrics.retire();
        }
    }

    /// The value in force. Hold the `Arc` for a whole scheduling cycle: a
    /// reload during the cycle does not change what the cycle sees.
    pub fn current(&self) -> Arc<T> {
        self.current.load_full()
    }

    /// A snapshot of the reload history. It is updated right after a swap, so
    /// for a moment it may name the value `current` just replaced.
    pub fn status(&self) -> BundleStatus {
        lock(&self.state).status.clone()
    }

    /// The pipeline step: run `build` (parse → validate → compile → test,
    /// supplied by the caller) and on success swap atomically; on failure keep
    /// the last good value and record the error. A panic inside `build` is
    /// caught and counts as a failure.
    pub fn reload_with<E: fmt::Display>(
        &self,
        build: impl FnOnce() -> Result<T, E>,
    ) -> ReloadOutcome {
        let _one_reload_at_a_time = lock(&self.reloading);
        let started = Instant::now();
        let attempted_at = Timestamp::now();
        let built = match panic::catch_unwind(AssertUnwindSafe(build)) {
            Ok(Ok(next)) => Ok(next),
            Ok(Err(error)) => Err(error.to_string()),
            Err(payload) => Err(format!(
                "building the bundle panicked ({}); this is a bug in Arbiter, please report it",
                panic_message(payload.as_ref())
            )),
        };
        let kept = self.current.load().identity();
        let mut state = lock(&self.state);
        let State { status, metrics } = &mut *state;
        status.attempts += 1;
        status.last_attempt_at = Some(attempted_at);
        let outcome = match built {
            Ok(next) if next.identity().digest == kept.digest => {
                status.last_error = None;
                tracing::debug!(bundle = %kept, "policy bundle unchanged");
                ReloadOutcome::Unchanged { identity: kept }
            }
            Ok(next) => {
                let identity = next.identity();
                self.current.store(Arc::new(next));
                let took = started.elapsed();
                status.identity = identity.clone();
                status.loaded_at = Timestamp::now();
                status.generation += 1;
                status.last_error = None;
                tracing::info!(bundle = %identity, previous = %kept, ?took, "policy bundle swapped in");
                ReloadOutcome::Swapped { identity, took }
            }
            Err(error) => {
                let took = started.elapsed();
                status.last_error = Some(error.clone());
                tracing::warn!(%error, kept = %kept, "policy bundle rejected; the last good bundle stays in force");
                ReloadOutcome::Rejected { error, kept, took }
            }
        };
        if let Some(metrics) = metrics {
            metrics.reloaded(&outcome, status.loaded_at);
        }
        outcome
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked (every
/// critical section here only assigns fields and records metrics; `build` runs under
/// `catch_unwind`), so poisoning is ignored rather than spread.
fn lock<V>(mutex: &Mutex<V>) -> MutexGuard<'_, V> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(message) = payload.downcast_ref::<&str>() {
        message
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message
    } else {
        "no message"
    }
}

/// A debounce that keeps reload latency (change → new bundle in force) well
/// under 100 ms while folding the kubelet's update (a handful of renames and
/// removals within a millisecond) or an editor's save into one call.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(50);

/// A burst that never pauses still gets a call every this many debounce
/// windows, so a directory written continuously is not ignored forever.
const MAX_WAIT_WINDOWS: u32 = 10;

/// How often a watcher whose directory disappeared looks for it again.
const REWATCH_EVERY: Duration = Duration::from_millis(200);

/// Why a bundle directory cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot read policy bundle directory {}: {source}; check the path and that the scheduler may read it", .dir.display())]
    Unreadable {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("policy bundle path {} is not a directory; point it at the directory holding bundle.yaml (for a ConfigMap, the volume's mount path)", .dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("cannot watch policy bundle directory {}: {source}; on Linux, check the fs.inotify.max_user_watches and fs.inotify.max_user_instances limits", .dir.display())]
    Watch { dir: PathBuf, source: notify::Error },
    #[error("cannot start the thread that watches policy bundle directory {}: {source}", .dir.display())]
    Thread {
        dir: PathBuf,
        source: std::io::Error,
    },
}

enum Signal {
    Fs(notify::Result<Event>),
    Stop,
}

/// Watches a bundle directory and calls `on_change` once changes have settled
/// (no new change for one debounce window, or at the latest ten windows after
/// the first change of a burst). Dropping it stops watching; the drop waits
/// for a running `on_change` to return.
///
/// It watches the directory itself, not its subdirectories: every change a
/// bundle can see shows up there. Writing, creating, removing or renaming a
/// file counts; so does the kubelet's ConfigMap update (new `..<timestamp>`
/// directory, `..data_tmp` symlink renamed over `..data`, old directory
/// removed), any number of times. Opening and reading files does not count,
/// so `on_change` may read the bundle without calling itself again.
///
/// It also watches the parent directory, for the directory's own entry
/// there: when the directory is removed, renamed away, replaced by another
/// one renamed over its name, or is a symlink swapped to another target,
/// `on_change` is called (a reload while it is missing fails and the last
/// good bundle stays in force) and the watch moves to whatever now has the
/// name. A path given relative is resolved against the working directory
/// once, when watching starts. If the name is gone (or the parent cannot be
/// watched), the watcher also looks for it every 200 ms; when a directory
/// is there again it is watched and `on_change` is called. Changes made
/// between its reappearance and the new watch are seen by that call's
/// reload, since it reads everything afresh.
pub struct DirWatcher {
    signals: mpsc::Sender<Signal>,
    worker: Option<JoinHandle<()>>,
}

impl DirWatcher {
    /// Starts watching `dir`. `debounce` below 1 ms is taken as 1 ms.
    pub fn spawn(
        dir: &Path,
        debounce: Duration,
        on_change: impl FnMut() + Send + 'static,
    ) -> Result<DirWatcher, WatchError> {
        let shown = dir.to_path_buf();
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(WatchError::NotADirectory { dir: shown }),
            Err(source) => return Err(WatchError::Unreadable { dir: shown, source }),
        }
        // notify reports absolute paths; the name is compared with them.
        let dir = std::path::absolute(dir).map_err(|source| WatchError::Unreadable {
            dir: shown.clone(),
            source,
        })?;
        let (signals, received) = mpsc::channel();
        let from_notify = signals.clone();
        let mut watcher = notify::recommended_watcher(move |event| {
            // The receiver is gone only once the worker has stopped.
            let _ = from_notify.send(Signal::Fs(event));
        })
        .map_err(|source| WatchError::Watch {
            dir: shown.clone(),
            source,
        })?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError::Watch {
                dir: shown.clone(),
                source,
            })?;
        let mut watches = DirWatches {
            parent: dir.parent().map(Path::to_path_buf),
            dir,
            watcher,
            dir_watched: true,
            parent_watched: false,
        };
        watches.watch_parent();
        let debounce = debounce.max(Duration::from_millis(1));
        let worker = thread::Builder::new()
            .name("bundle-watch".to_string())
            .spawn(move || watch_loop(watches, debounce, &received, on_change))
            .map_err(|source| WatchError::Thread { dir: shown, source })?;
        Ok(DirWatcher {
            signals,
            worker: Some(worker),
        })
    }
}

impl Drop for DirWatcher {
    fn drop(&mut self) {
        // A failed send means the worker has already stopped.
        let _ = self.signals.send(Signal::Stop);
        if let Some(worker) = self.worker.take() {
            // Joining itself would deadlock (a DirWatcher dropped from its
            // own `on_change`); the worker stops on the Stop signal anyway.
            if worker.thread().id() != thread::current().id() {
                let _ = worker.join();
            }
        }
    }
}

/// The two inotify (or other backend) watches: on the directory, and on
/// its parent for the directory's entry.
struct DirWatches {
    /// Absolute.
    dir: PathBuf,
    parent: Option<PathBuf>,
    watcher: RecommendedWatcher,
    dir_watched: bool,
    parent_watched: bool,
}

/// What one filesystem event means to the watched directory.
#[derive(Debug, PartialEq)]
enum DirChange {
    /// Nothing a reload could see: a sibling in the parent, or a read.
    Nothing,
    /// A change inside the directory.
    Change,
    /// The directory's name now leads elsewhere, or nowhere: removed,
    /// renamed away or over, created, or a symlink swapped.
    Replaced,
    /// The parent itself was removed or renamed away.
    LostParent,
}

impl DirWatches {
    fn watch_parent(&mut self) {
        if let (false, Some(parent)) = (self.parent_watched, &self.parent) {
            self.parent_watched = self
                .watcher
                .watch(parent, RecursiveMode::NonRecursive)
                .is_ok();
        }
    }

    /// Moves the directory's watch to whatever has its name now; whether
    /// there is a directory to watch.
    fn rearm(&mut self) -> bool {
        // The old watch followed the old directory away, died with it, or
        // is on a symlink's old target; an error here only says it is gone.
        let _ = self.watcher.unwatch(&self.dir);
        self.dir_watched = self.dir.is_dir()
            && self
                .watcher
                .watch(&self.dir, RecursiveMode::NonRecursive)
                .is_ok();
        self.watch_parent();
        self.dir_watched
    }

    fn classify(&self, event: &Event) -> DirChange {
        let replacing = matches!(
            event.kind,
            EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
        );
        if replacing && event.paths.iter().any(|path| path == &self.dir) {
            return DirChange::Replaced;
        }
        if replacing
            && self
                .parent
                .as_ref()
                .is_some_and(|parent| event.paths.iter().any(|path| path == parent))
        {
            return DirChange::LostParent;
        }
        let inside =
            event.paths.is_empty() || event.paths.iter().any(|path| path.starts_with(&self.dir));
        if inside && is_change(&event.kind) {
            DirChange::Change
        } else {
            DirChange::Nothing
        }
    }
}

/// The watcher thread: folds filesystem events into debounced calls, and
/// re-establishes the watch if the directory is replaced.
fn watch_loop(
    mut watches: DirWatches,
    debounce: Duration,
    signals: &Receiver<Signal>,
    mut on_change: impl FnMut(),
) {
    let max_wait = debounce * MAX_WAIT_WINDOWS;
    let mut burst_started: Option<Instant> = None;
    let mut fire_at: Option<Instant> = None;
    let note_change = |burst_started: &mut Option<Instant>, fire_at: &mut Option<Instant>| {
        let now = Instant::now();
        let first = *burst_started.get_or_insert(now);
        *fire_at = Some((now + debounce).min(first + max_wait));
    };
    let dir = watches.dir.clone();
    loop {
        // Checked before every wait, so a steady stream of events already
        // queued cannot postpone a due call.
        if fire_at.is_some_and(|due| Instant::now() >= due) {
            fire_at = None;
            burst_started = None;
            if panic::catch_unwind(AssertUnwindSafe(&mut on_change)).is_err() {
                tracing::error!(dir = %dir.display(), "the bundle reload callback panicked; watching goes on");
            }
        }
        // Without both watches, the name is looked for on a timer too.
        let polling = !(watches.dir_watched && watches.parent_watched);
        let wait = match (fire_at, polling) {
            (Some(due), false) => Some(due.saturating_duration_since(Instant::now())),
            (Some(due), true) => Some(
                due.saturating_duration_since(Instant::now())
                    .min(REWATCH_EVERY),
            ),
            (None, true) => Some(REWATCH_EVERY),
            (None, false) => None,
        };
        let signal = match wait {
            Some(wait) => signals.recv_timeout(wait),
            None => signals.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match signal {
            Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Signal::Fs(Ok(event))) => match watches.classify(&event) {
                DirChange::Nothing => {}
                DirChange::Change => note_change(&mut burst_started, &mut fire_at),
                DirChange::Replaced => {
                    let was_watched = watches.dir_watched;
                    if watches.rearm() {
                        if !was_watched {
                            tracing::info!(dir = %dir.display(), "policy bundle directory is back; watching it again");
                        }
                    } else if was_watched {
                        tracing::warn!(dir = %dir.display(), "policy bundle directory disappeared; the last good bundle stays in force until it is back");
                    }
                    note_change(&mut burst_started, &mut fire_at);
                }
                DirChange::LostParent => {
                    if let Some(parent) = &watches.parent {
                        let _ = watches.watcher.unwatch(parent);
                    }
                    watches.parent_watched = false;
                    watches.rearm();
                    note_change(&mut burst_started, &mut fire_at);
                }
            },
            Ok(Signal::Fs(Err(error))) => {
                // Events may have been lost (e.g. the inotify queue
                // overflowed): a reload reads everything afresh.
                tracing::warn!(dir = %dir.display(), %error, "watching the policy bundle directory failed; reloading to be safe");
                note_change(&mut burst_started, &mut fire_at);
            }
            Err(RecvTimeoutError::Timeout) => {
                watches.watch_parent();
                if !watches.dir_watched && watches.rearm() {
                    tracing::info!(dir = %dir.display(), "policy bundle directory is back; watching it again");
                    note_change(&mut burst_started, &mut fire_at);
                }
            }
        }
    }
}

/// Whether an event can change what a re-read of the directory sees. Opening
/// and reading files (the reload's own reads) cannot; a file closed after
/// writing can.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::fs;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Barrier;

    /// Generous: CI machines are slow and shared. Waits poll a channel and
    /// return as soon as the awaited call arrives.
    const PATIENCE: Duration = Duration::from_secs(10);
    /// How long without a call counts as "no more calls".
    const QUIET: Duration = Duration::from_secs(1);

    /// A stand-in for a compiled bundle: the text of `bundle.yaml`.
    #[derive(Debug)]
    struct Text(String);

    impl Loaded for Text {
        fn identity(&self) -> Identity {
            Identity {
                name: "test".to_string(),
                version: "1".to_string(),
                digest: self.0.clone(),
            }
        }
    }

    fn text(s: &str) -> Text {
        Text(s.to_string())
    }

    fn read_bundle(dir: &Path) -> Result<Text, String> {
        let path = dir.join("bundle.yaml");
        fs::read_to_string(&path)
            .map(Text)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    #[test]
    fn a_good_build_swaps_and_counts_a_generation() {
        let bundles = Reloadable::new(text("a"));
        assert_eq!(bundles.status().generation, 0);
        match bundles.reload_with(|| Ok::<_, Infallible>(text("b"))) {
            ReloadOutcome::Swapped { identity, .. } => assert_eq!(identity.digest, "b"),
            other => panic!("expected a swap, got {other:?}"),
        }
        assert_eq!(bundles.current().0, "b");
        let status = bundles.status();
        assert_eq!(status.identity.digest, "b");
        assert_eq!((status.generation, status.attempts), (1, 1));
        assert_eq!(status.last_error, None);
        assert!(status.last_attempt_at.is_some());
    }

    #[test]
    fn a_failed_build_keeps_the_last_good_value_and_records_why() {
        let bundles = Reloadable::new(text("a"));
        let outcome =
            bundles.reload_with(|| Err::<Text, _>("bundle.yaml:3:7: unknown hook `wieght`"));
        match outcome {
            ReloadOutcome::Rejected { error, kept, .. } => {
                assert_eq!(error, "bundle.yaml:3:7: unknown hook `wieght`");
                assert_eq!(kept.digest, "a");
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!(bundles.current().0, "a");
        let status = bundles.status();
        assert_eq!(status.identity.digest, "a");
        assert_eq!((status.generation, status.attempts), (0, 1));
        assert_eq!(
            status.last_error.as_deref(),
            Some("bundle.yaml:3:7: unknown hook `wieght`")
        );
    }

    #[test]
    fn a_panicking_build_is_a_rejection() {
        let bundles = Reloadable::new(text("a"));
        let outcome =
            bundles.reload_with(|| -> Result<Text, Infallible> { panic!("compiler bug") });
        match outcome {
            ReloadOutcome::Rejected { error, .. } => {
                assert!(error.contains("compiler bug"), "{error}")
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!(bundles.current().0, "a");
        let after = bundles.reload_with(|| Ok::<_, Infallible>(text("b")));
        assert!(matches!(after, ReloadOutcome::Swapped { .. }), "{after:?}");
    }

    #[test]
    fn the_same_digest_is_not_swapped_and_clears_the_last_error() {
        let bundles = Reloadable::new(text("a"));
        let first = bundles.current();
        let _ = bundles.reload_with(|| Err::<Text, _>("broken"));
        let outcome = bundles.reload_with(|| Ok::<_, Infallible>(text("a")));
        assert_eq!(
            outcome,
            ReloadOutcome::Unchanged {
                identity: first.identity()
            }
        );
        assert!(
            Arc::ptr_eq(&first, &bundles.current()),
            "the value in force was replaced"
        );
        let status = bundles.status();
        assert_eq!((status.generation, status.attempts), (0, 2));
        assert_eq!(status.last_error, None);
    }

    #[test]
    fn status_serialises_with_rfc3339_times() {
        let bundles = Reloadable::new(text("a"));
        let json = serde_json::to_value(bundles.status()).expect("status serialises");
        let loaded_at = json["loadedAt"].as_str().expect("loadedAt is a string");
        assert!(loaded_at.parse::<Timestamp>().is_ok(), "{loaded_at}");
        assert_eq!(json["identity"]["digest"], "a");
        assert_eq!(json["lastError"], serde_json::Value::Null);
    }

    #[test]
    fn a_reloadable_reports_what_is_in_force_and_every_result() {
        use crate::metrics::{encode, PolicyMetrics};
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = PolicyMetrics::register(&mut registry);
        let bundles = Reloadable::new(text("a"));
        let _ = bundles.reload_with(|| Err::<Text, _>("broken"));
        assert!(bundles.report_to(&metrics, "dir"));
        assert!(
            !bundles.report_to(&metrics, "elsewhere"),
            "a second report_to took over"
        );
        let info = |digest: &str| {
            format!(
                "arbiter_policy_bundle_info{{bundle=\"dir\",name=\"test\",version=\"1\",digest=\"{digest}\"}} 1\n"
            )
        };
        let shown = encode(&registry);
        assert!(shown.contains(&info("a")), "{shown}");
        assert!(
            shown.contains("arbiter_policy_bundle_last_reload_success{bundle=\"dir\"} 0\n"),
            "the rejection before report_to is the latest result:\n{shown}"
        );
        assert!(
            shown.contains(
                "arbiter_policy_bundle_reloads_total{bundle=\"dir\",result=\"rejected\"} 0\n"
            ),
            "a result before report_to was counted:\n{shown}"
        );
        let _ = bundles.reload_with(|| Ok::<_, Infallible>(text("a")));
        let _ = bundles.reload_with(|| Ok::<_, Infallible>(text("b")));
        let _ = bundles.reload_with(|| Err::<Text, _>("broken again"));
        let shown = encode(&registry);
        for (result, count) in [("loaded", 1), ("unchanged", 1), ("rejected", 1)] {
            let series = format!(
                "arbiter_policy_bundle_reloads_total{{bundle=\"dir\",result=\"{result}\"}} {count}\n"
            );
            assert!(shown.contains(&series), "lacks {series}:\n{shown}");
        }
        assert!(shown.contains(&info("b")), "{shown}");
        assert!(!shown.contains(&info("a")), "{shown}");
        assert!(!shown.contains("elsewhere"), "{shown}");
        let loaded_at = bundles.status().loaded_at.as_millisecond() as f64 / 1000.0;
        let in_force_since = shown
            .lines()
            .find_map(|l| {
                l.strip_prefix("arbiter_policy_bundle_loaded_timestamp_seconds{bundle=\"dir\"} ")
            })
            .and_then(|v| v.parse::<f64>().ok());
        assert_eq!(in_force_since, Some(loaded_at), "{shown}");
    }

    #[test]
    fn a_source_that_stops_reporting_leaves_nothing_in_force_in_the_metrics() {
        use crate::metrics::{encode, PolicyMetrics};
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = PolicyMetrics::register(&mut registry);
        let bundles = Reloadable::new(text("a"));
        assert!(bundles.report_to(&metrics, "ConfigMap p/rules"));
        let _ = bundles.reload_with(|| Ok::<_, Infallible>(text("b")));
        bundles.stop_reporting();
        let _ = bundles.reload_with(|| Ok::<_, Infallible>(text("c")));
        let shown = encode(&registry);
        assert!(!shown.contains("arbiter_policy_bundle_info{"), "{shown}");
        assert!(
            !shown.contains("arbiter_policy_bundle_last_reload_success{"),
            "{shown}"
        );
        assert!(
            shown.contains(
                "arbiter_policy_bundle_reloads_total{bundle=\"ConfigMap p/rules\",result=\"loaded\"} 1\n"
            ),
            "the swap after stop_reporting was counted, or the one before was lost:\n{shown}"
        );
        assert!(
            bundles.report_to(&metrics, "ConfigMap p/rules"),
            "it may report again"
        );
    }

    /// A value that is only correct whole: every copy equals `stamp`.
    struct Stamped {
        stamp: u64,
        copies: Vec<u64>,
    }

    impl Loaded for Stamped {
        fn identity(&self) -> Identity {
            Identity {
                name: "stamped".to_string(),
                version: "1".to_string(),
                digest: self.stamp.to_string(),
            }
        }
    }

    fn stamped(stamp: u64) -> Stamped {
        Stamped {
            stamp,
            copies: vec![stamp; 64],
        }
    }

    #[test]
    fn readers_always_see_one_whole_value_while_reloads_run() {
        let bundles = Arc::new(Reloadable::new(stamped(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(2));
        let reader = thread::spawn({
            let bundles = Arc::clone(&bundles);
            let stop = Arc::clone(&stop);
            let start = Arc::clone(&start);
            move || {
                start.wait();
                let mut last = 0;
                loop {
                    // Read before loading: the load after `stop` is seen
                    // comes after the last reload.
                    let stopping = stop.load(Ordering::Acquire);
                    let seen = bundles.current();
                    assert!(
                        seen.copies.iter().all(|&c| c == seen.stamp),
                        "torn value {}",
                        seen.stamp
                    );
                    assert!(
                        seen.stamp >= last,
                        "went back from {last} to {}",
                        seen.stamp
                    );
                    last = seen.stamp;
                    if stopping {
                        return last;
                    }
                }
            }
        });
        start.wait();
        for stamp in 1..=1000 {
            let outcome = bundles.reload_with(|| Ok::<_, Infallible>(stamped(stamp)));
            assert!(
                matches!(outcome, ReloadOutcome::Swapped { .. }),
                "{outcome:?}"
            );
        }
        stop.store(true, Ordering::Release);
        let last_seen = reader.join().expect("the reader saw a torn or stale value");
        assert_eq!(last_seen, 1000, "the reader's last load after all reloads");
        assert_eq!(bundles.current().stamp, 1000);
        assert_eq!(bundles.status().generation, 1000);
    }

    /// Receives until `wanted` holds, or fails after `PATIENCE` without one.
    fn wait_for<M: fmt::Debug>(calls: &Receiver<M>, what: &str, wanted: impl Fn(&M) -> bool) {
        loop {
            match calls.recv_timeout(PATIENCE) {
                Ok(message) if wanted(&message) => return,
                Ok(_) => {}
                Err(e) => panic!("{what}: no call within {PATIENCE:?} ({e})"),
            }
        }
    }

    /// Counts the calls still arriving until none has come for `QUIET`.
    fn drain<M>(calls: &Receiver<M>) -> usize {
        let mut count = 0;
        while calls.recv_timeout(QUIET).is_ok() {
            count += 1;
            assert!(count < 100, "calls keep coming: the watcher feeds itself");
        }
        count
    }

    fn signal_on_change(dir: &Path) -> (DirWatcher, Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let watcher = DirWatcher::spawn(dir, DEFAULT_DEBOUNCE, move || {
            let _ = tx.send(());
        })
        .expect("watching a fresh temporary directory");
        (watcher, rx)
    }

    /// Updates `dir` exactly as the kubelet's AtomicWriter updates a
    /// ConfigMap volume.
    #[cfg(unix)]
    fn kubelet_update(dir: &Path, serial: u32, files: &[(&str, &str)]) {
        use std::os::unix::fs::symlink;
        let data = dir.join("..data");
        let old = fs::read_link(&data).ok();
        let stamped = format!("..2026_11_30_04_00_00.{serial:09}");
        fs::create_dir(dir.join(&stamped)).expect("timestamped dir");
        for (name, content) in files {
            fs::write(dir.join(&stamped).join(name), content).expect("payload file");
        }
        symlink(&stamped, dir.join("..data_tmp")).expect("..data_tmp symlink");
        fs::rename(dir.join("..data_tmp"), &data).expect("..data swap");
        for (name, _) in files {
            let visible = dir.join(name);
            if fs::symlink_metadata(&visible).is_err() {
                symlink(Path::new("..data").join(name), visible).expect("per-key symlink");
            }
        }
        if let Some(old) = old {
            fs::remove_dir_all(dir.join(old)).expect("old timestamped dir");
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_kubelet_data_swap_reloads_every_time() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        kubelet_update(&dir, 0, &[("bundle.yaml", "v0"), ("w.wasm", "\0asm")]);
        let bundles = Arc::new(Reloadable::new(read_bundle(&dir).expect("first bundle")));
        let (tx, outcomes) = mpsc::channel();
        let _watcher = DirWatcher::spawn(&dir, DEFAULT_DEBOUNCE, {
            let bundles = Arc::clone(&bundles);
            let dir = dir.clone();
            move || {
                let _ = tx.send(bundles.reload_with(|| read_bundle(&dir)));
            }
        })
        .expect("watching the volume");
        for serial in 1..=20 {
            let want = format!("v{serial}");
            kubelet_update(&dir, serial, &[("bundle.yaml", &want), ("w.wasm", "\0asm")]);
            wait_for(&outcomes, &format!("update {serial}"), |outcome| {
                assert!(
                    !matches!(outcome, ReloadOutcome::Rejected { .. }),
                    "{outcome:?}"
                );
                matches!(outcome, ReloadOutcome::Swapped { identity, .. } if identity.digest == want)
            });
            assert_eq!(bundles.current().0, want);
            assert_eq!(
                fs::read_to_string(dir.join("bundle.yaml")).expect("re-read"),
                want
            );
        }
        assert_eq!(bundles.status().generation, 20);
    }

    #[test]
    fn plain_edits_each_trigger() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        fs::write(dir.join("bundle.yaml"), "a").expect("bundle.yaml");
        let (_watcher, calls) = signal_on_change(dir);
        fs::write(dir.join("bundle.yaml"), "b").expect("write");
        wait_for(&calls, "write", |_| true);
        drain(&calls);
        fs::write(dir.join("extra.wasm"), "\0asm").expect("create");
        wait_for(&calls, "create", |_| true);
        drain(&calls);
        fs::rename(dir.join("extra.wasm"), dir.join("renamed.wasm")).expect("rename");
        wait_for(&calls, "rename", |_| true);
        drain(&calls);
        fs::remove_file(dir.join("renamed.wasm")).expect("remove");
        wait_for(&calls, "remove", |_| true);
    }

    #[test]
    fn a_burst_of_writes_makes_few_calls() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path();
        let (tx, calls) = mpsc::channel();
        // A wide window, so the burst surely falls inside it on a slow machine.
        let _watcher = DirWatcher::spawn(dir, Duration::from_millis(300), move || {
            let _ = tx.send(());
        })
        .expect("watching a fresh temporary directory");
        for i in 0..50 {
            fs::write(dir.join("bundle.yaml"), format!("version {i}")).expect("write");
        }
        wait_for(&calls, "burst", |_| true);
        let more = drain(&calls);
        assert!(more < 5, "50 writes made {} calls", more + 1);
    }

    #[test]
    fn reading_the_bundle_does_not_trigger() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        fs::write(dir.join("bundle.yaml"), "a").expect("bundle.yaml");
        let (tx, calls) = mpsc::channel();
        let _watcher = DirWatcher::spawn(&dir, DEFAULT_DEBOUNCE, {
            let dir = dir.clone();
            move || {
                for entry in fs::read_dir(&dir).expect("list").flatten() {
                    let _ = fs::read(entry.path());
                }
                let _ = tx.send(());
            }
        })
        .expect("watching a fresh temporary directory");
        for _ in 0..20 {
            let _ = fs::read_dir(&dir).expect("list").count();
            let _ = fs::read_to_string(dir.join("bundle.yaml")).expect("read");
        }
        assert!(
            calls.recv_timeout(QUIET).is_err(),
            "reads alone triggered a call"
        );
        fs::write(dir.join("bundle.yaml"), "b").expect("write");
        wait_for(&calls, "write", |_| true);
        assert_eq!(
            drain(&calls),
            0,
            "the callback's own reads triggered it again"
        );
    }

    #[test]
    fn a_removed_and_recreated_directory_is_watched_again() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("bundle");
        fs::create_dir(&dir).expect("bundle dir");
        fs::write(dir.join("bundle.yaml"), "a").expect("bundle.yaml");
        let (_watcher, calls) = signal_on_change(&dir);
        fs::remove_dir_all(&dir).expect("remove");
        wait_for(&calls, "removal", |_| true);
        drain(&calls);
        fs::create_dir(&dir).expect("recreate");
        fs::write(dir.join("bundle.yaml"), "b").expect("bundle.yaml again");
        wait_for(&calls, "recreation", |_| true);
        drain(&calls);
        fs::write(dir.join("bundle.yaml"), "c").expect("write after recreation");
        wait_for(&calls, "write after recreation", |_| true);
    }

    #[cfg(unix)]
    #[test]
    fn a_renamed_over_or_swapped_directory_is_followed() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().expect("temp dir");
        for version in ["v1", "v2", "v3"] {
            fs::create_dir(tmp.path().join(version)).expect("version dir");
        }
        let dir = tmp.path().join("bundle");
        symlink("v1", &dir).expect("bundle -> v1");
        let (_watcher, calls) = signal_on_change(&dir);
        // Only the parent sees a symlink swapped: nothing in v1 changes.
        symlink("v2", tmp.path().join("bundle.tmp")).expect("bundle.tmp -> v2");
        fs::rename(tmp.path().join("bundle.tmp"), &dir).expect("swap");
        wait_for(&calls, "symlink swap", |_| true);
        drain(&calls);
        fs::write(tmp.path().join("v2").join("bundle.yaml"), "b").expect("write in v2");
        wait_for(&calls, "write in the new target", |_| true);
        drain(&calls);
        // A real directory renamed over the name.
        fs::remove_file(&dir).expect("remove the symlink");
        fs::rename(tmp.path().join("v3"), &dir).expect("rename v3 over");
        wait_for(&calls, "rename over", |_| true);
        drain(&calls);
        fs::write(dir.join("bundle.yaml"), "c").expect("write in the renamed directory");
        wait_for(&calls, "write in the renamed directory", |_| true);
    }

    #[test]
    fn spawn_names_a_missing_directory() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let missing = tmp.path().join("nope");
        let error = DirWatcher::spawn(&missing, DEFAULT_DEBOUNCE, || {})
            .err()
            .expect("a missing directory is an error");
        assert!(matches!(error, WatchError::Unreadable { .. }), "{error:?}");
        assert!(
            error.to_string().contains(&missing.display().to_string()),
            "{error}"
        );
        let file = tmp.path().join("bundle.yaml");
        fs::write(&file, "a").expect("file");
        let error = DirWatcher::spawn(&file, DEFAULT_DEBOUNCE, || {})
            .err()
            .expect("a file is not a bundle directory");
        assert!(
            matches!(error, WatchError::NotADirectory { .. }),
            "{error:?}"
        );
    }
}
