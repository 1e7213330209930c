//! Reload latency of a watched policy bundle directory: from the start of a
//! ConfigMap update (written as the kubelet's AtomicWriter writes it: new
//! timestamped directory, `..data` symlink swap, old directory removed) to the
//! callback, and to the new value in force, through `DirWatcher` and
//! `Reloadable::reload_with` with a trivial build (read `bundle.yaml`).
//!
//! `cargo run --release --example reload-latency [-- CHANGES [DEBOUNCE_MS]]`
//! prints p50, p99 and max over CHANGES updates (default 200; debounce
//! default `DEFAULT_DEBOUNCE`). Measured only, never asserted.

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    unix::main()
}

#[cfg(not(unix))]
fn main() {
    eprintln!("reload-latency writes ConfigMap-style symlinks and needs a Unix system");
}

#[cfg(unix)]
mod unix {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use std::process::ExitCode;
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use arbiter::policy::reload::{
        DirWatcher, Identity, Loaded, ReloadOutcome, Reloadable, DEFAULT_DEBOUNCE,
    };

    struct Text(String);

    impl Loaded for Text {
        fn identity(&self) -> Identity {
            Identity {
                name: "latency".to_string(),
                version: "1".to_string(),
                digest: self.0.clone(),
            }
        }
    }

    fn read_bundle(dir: &Path) -> std::io::Result<Text> {
        fs::read_to_string(dir.join("bundle.yaml")).map(Text)
    }

    fn kubelet_update(dir: &Path, serial: u32, content: &str) -> std::io::Result<()> {
        let data = dir.join("..data");
        let old = fs::read_link(&data).ok();
        let stamped = format!("..2026_11_30_04_00_00.{serial:09}");
        fs::create_dir(dir.join(&stamped))?;
        fs::write(dir.join(&stamped).join("bundle.yaml"), content)?;
        symlink(&stamped, dir.join("..data_tmp"))?;
        fs::rename(dir.join("..data_tmp"), &data)?;
        if fs::symlink_metadata(dir.join("bundle.yaml")).is_err() {
            symlink("..data/bundle.yaml", dir.join("bundle.yaml"))?;
        }
        if let Some(old) = old {
            fs::remove_dir_all(dir.join(old))?;
        }
        Ok(())
    }

    fn percentile(sorted: &[Duration], p: f64) -> Duration {
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    fn report(what: &str, mut samples: Vec<Duration>) {
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{what:<30} p50 {:7.2} ms   p99 {:7.2} ms   max {:7.2} ms",
            ms(percentile(&samples, 50.0)),
            ms(percentile(&samples, 99.0)),
            ms(percentile(&samples, 100.0)),
        );
    }

    pub fn main() -> ExitCode {
        let mut args = std::env::args().skip(1);
        let changes: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
        let debounce = args
            .next()
            .and_then(|a| a.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_DEBOUNCE);
        match run(changes, debounce) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("reload-latency: {error}");
                ExitCode::FAILURE
            }
        }
    }

    fn run(changes: u32, debounce: Duration) -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().to_path_buf();
        kubelet_update(&dir, 0, "v0")?;
        let bundles = Arc::new(Reloadable::new(read_bundle(&dir)?));
        let (tx, done) = mpsc::channel();
        let _watcher = DirWatcher::spawn(&dir, debounce, {
            let bundles = Arc::clone(&bundles);
            let dir = dir.clone();
            move || {
                let called = Instant::now();
                if let ReloadOutcome::Swapped { identity, .. } =
                    bundles.reload_with(|| read_bundle(&dir))
                {
                    let _ = tx.send((identity.digest, called, Instant::now()));
                }
            }
        })?;
        let mut to_callback = Vec::new();
        let mut to_in_force = Vec::new();
        for serial in 1..=changes {
            let want = format!("v{serial}");
            let changed = Instant::now();
            kubelet_update(&dir, serial, &want)?;
            loop {
                let (digest, called, swapped) = done.recv_timeout(Duration::from_secs(10))?;
                if digest == want {
                    to_callback.push(called - changed);
                    to_in_force.push(swapped - changed);
                    break;
                }
            }
        }
        println!("{changes} ConfigMap-style updates, debounce {debounce:?}");
        report("change -> on_change called", to_callback);
        report("change -> new bundle in force", to_in_force);
        Ok(())
    }
}
