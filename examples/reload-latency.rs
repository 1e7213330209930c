//! Reload latency of a watched policy bundle directory: from the start of a
//! ConfigMap update (written as the kubelet's AtomicWriter writes it: new
//! timestamped directory, `..data` symlink swap, old directory removed) to the
//! callback, and to the new value in force, through `DirWatcher` and
//! `Reloadable::reload_with`.
//!
//! `cargo run --release --example reload-latency [-- [--bundle [--new-module | --new-code]] [CHANGES [DEBOUNCE_MS]]]`
//! prints p50, p99 and max over CHANGES updates (default 200; debounce
//! default `DEFAULT_DEBOUNCE`). Without `--bundle` the build is trivial
//! (read `bundle.yaml`); with it, the build is the real pipeline,
//! `bundle::load_path` (parse, validate, compile, run the bundle's tests), on
//! a generated bundle of 20 policies — 16 CEL over all five hooks and 4 WASM
//! weight policies on `policies/plugins/shortest-first.wasm` — with 6 tests.
//! Each update changes `metadata.version`; the module's bytes stay the same,
//! so it is compiled once and reused, as for a ConfigMap whose module did not
//! change. `--new-module` also makes every update ship a new module (a custom
//! section naming the update appended): the code is the same, so the
//! runtime's compilation cache serves every function. `--new-code` ships a
//! module whose code changed: the default `scale` constant (`f64.const
//! 100`) in the plugin's functions is rewritten each update, as a one-line
//! edit and rebuild of the plugin would, so the functions holding it are
//! compiled afresh and the rest come from the cache.
//! Measured only, never asserted.

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

    use arbiter_policy::bundle::{self, LoadOptions};
    use arbiter_policy::reload::{
        DirWatcher, Identity, Loaded, ReloadOutcome, Reloadable, DEFAULT_DEBOUNCE,
    };
    use arbiter_policy::wasm::Runtime;

    /// The same allocator as the `arbiter` binary.
    #[global_allocator]
    static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

    const MODULE: &str = "shortest-first.wasm";

    struct Text(String);

    impl Loaded for Text {
        fn identity(&self) -> Identity {
            Identity {
                name: "latency".to_string(),
                version: self.0.clone(),
                digest: self.0.clone(),
            }
        }
    }

    fn read_bundle(dir: &Path) -> std::io::Result<Text> {
        fs::read_to_string(dir.join("bundle.yaml")).map(Text)
    }

    /// One ConfigMap update as the kubelet writes it: the files in a new
    /// timestamped directory, `..data` swapped to it, top-level symlinks for
    /// new keys, the old directory removed.
    fn kubelet_update(dir: &Path, serial: u32, files: &[(&str, &[u8])]) -> std::io::Result<()> {
        let data = dir.join("..data");
        let old = fs::read_link(&data).ok();
        let stamped = format!("..2026_11_30_04_00_00.{serial:09}");
        fs::create_dir(dir.join(&stamped))?;
        for (name, content) in files {
            fs::write(dir.join(&stamped).join(name), content)?;
        }
        symlink(&stamped, dir.join("..data_tmp"))?;
        fs::rename(dir.join("..data_tmp"), &data)?;
        for (name, _) in files {
            if fs::symlink_metadata(dir.join(name)).is_err() {
                symlink(Path::new("..data").join(name), dir.join(name))?;
            }
        }
        if let Some(old) = old {
            fs::remove_dir_all(dir.join(old))?;
        }
        Ok(())
    }

    /// `module` with a custom section (id 0) named `arbiter-bench` holding
    /// `payload` appended: the same code, different bytes and digest.
    fn with_custom_section(module: &[u8], payload: &str) -> Vec<u8> {
        use wasm_encoder::Section;
        let mut out = module.to_vec();
        wasm_encoder::CustomSection {
            name: "arbiter-bench".into(),
            data: payload.as_bytes().into(),
        }
        .append_to(&mut out);
        out
    }

    /// A bundle of 20 policies (16 CEL over every hook, 4 WASM weight
    /// policies on one module) and 6 tests, at version `serial`.
    fn generated_bundle(serial: u32) -> String {
        let mut policies = String::new();
        for k in 0..4 {
            policies += &format!(
                r#"  - name: weight-cel-{k}
    hook: weight
    cel:
      expression: >-
        double(workload.priority) * workload.priorityWeight * params.factor
        + (workload.ageSeconds / 60.0 > 1440.0 ? 1440.0 : workload.ageSeconds / 60.0)
    config: {{factor: {f}.0}}
  - name: admission-cel-{k}
    hook: admission
    match: {{namespaces: [team-{k}]}}
    cel:
      expression: "workload.gpus <= params.maxGpus"
      messageExpression: "'team-{k} jobs may ask for at most ' + string(params.maxGpus) + ' GPUs, got ' + string(workload.gpus)"
    config: {{maxGpus: {g}}}
  - name: weight-wasm-{k}
    hook: weight
    match: {{namespaces: [team-{k}]}}
    wasm:
      module: {MODULE}
      config: {{scale: 100.0, referenceSeconds: {r}.0, unknownScore: 0.0}}
    limits: {{timeoutMs: 50, memoryMiB: 32}}
"#,
                f = k + 1,
                g = 4 * (k + 1),
                r = 3600 * (k + 1),
            );
        }
        for k in 0..3 {
            policies += &format!(
                r#"  - name: fair-share-cel-{k}
    hook: fairShare
    match: {{clusterQueues: [cq-{k}]}}
    cel:
      expression: "params.baseWeight / (1.0 + clusterQueue.decayedUsage / params.referenceGpuSeconds)"
    config: {{baseWeight: 1.0, referenceGpuSeconds: {r}.0}}
  - name: flavor-cel-{k}
    hook: flavor
    match: {{clusterQueues: [cq-{k}]}}
    cel:
      expression: "workload.namespace in params.premiumNamespaces ? params.premiumOrder : params.standardOrder"
    config:
      premiumNamespaces: [production]
      premiumOrder: [a100-80gb, a100, v100]
      standardOrder: [a100, v100]
"#,
                r = 57_600 * (k + 1),
            );
        }
        for k in 0..2 {
            policies += &format!(
                r#"  - name: autoscale-cel-{k}
    hook: autoscale
    match: {{flavors: [pool-{k}]}}
    cel:
      expression: "(flavor.utilization * double(flavor.nodes) + flavor.pendingNodes) / (flavor.targetUtilization / 100.0)"
"#
            );
        }
        format!(
            r#"apiVersion: arbiter.dev/v1alpha1
kind: PolicyBundle
metadata: {{name: reload-latency, version: "{serial}"}}
spec:
  policies:
{policies}  tests:
  - name: class-weight
    policy: weight-cel-1
    input:
      workloads: [{{name: a, namespace: x, priority: 100, priorityWeight: 2.0}}]
    expect: {{scores: [400.0]}}
  - name: big-job-denied
    policy: admission-cel-0
    input:
      workload: {{namespace: team-0, gpus: 16}}
    expect: {{allowed: false, reasonContains: "at most 4 GPUs, got 16"}}
  - name: shorter-estimate-scores-higher
    policy: weight-wasm-0
    input:
      workloads:
      - {{name: short, namespace: team-0, estimate: {{runtimeSeconds: 600, samples: 10}}}}
      - {{name: long, namespace: team-0, estimate: {{runtimeSeconds: 36000, samples: 10}}}}
      - {{name: unknown, namespace: team-0}}
    expect: {{scores: [85.71428571428571, 9.090909090909092, 0.0]}}
  - name: heavy-user-gets-lower-weight
    policy: fair-share-cel-0
    input:
      clusterQueues:
      - {{name: idle, decayedUsage: 0}}
      - {{name: busy, decayedUsage: 57600}}
    expect: {{weights: [1.0, 0.5]}}
  - name: research-skips-premium
    policy: flavor-cel-0
    input:
      workload: {{namespace: ai-research}}
      candidates: [a100-80gb, a100, v100]
    expect: {{flavors: [a100, v100]}}
  - name: scale-to-target
    policy: autoscale-cel-0
    input:
      flavors:
      - {{name: pool-0, nodes: 4, minNodes: 2, maxNodes: 6, utilization: 1.0, pendingNodes: 1.0, targetUtilization: 80}}
    expect: {{nodes: [7]}}
"#
        )
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

    /// How the WASM module changes from one update to the next.
    #[derive(Clone, Copy, PartialEq)]
    enum ModuleChange {
        None,
        /// New bytes, same code (a custom section).
        Bytes,
        /// A constant in the code changes.
        Code,
    }

    /// `module` with every `f64.const 100` instruction's immediate replaced
    /// by `100 + serial / 1024`, or an error if it has none.
    fn with_changed_constant(module: &[u8], serial: u32) -> Result<Vec<u8>, String> {
        let mut pattern = vec![0x44u8];
        pattern.extend_from_slice(&100.0f64.to_le_bytes());
        let value = (100.0 + f64::from(serial) / 1024.0).to_le_bytes();
        let mut out = module.to_vec();
        let mut found = 0;
        let mut i = 0;
        while i + pattern.len() <= out.len() {
            if out[i..i + pattern.len()] == pattern[..] {
                out[i + 1..i + pattern.len()].copy_from_slice(&value);
                found += 1;
                i += pattern.len();
            } else {
                i += 1;
            }
        }
        if found == 0 {
            return Err(format!("{MODULE} has no `f64.const 100` to change"));
        }
        Ok(out)
    }

    /// What each update writes and how the callback builds the new value.
    #[derive(Clone, Copy, PartialEq)]
    enum Build {
        /// Read `bundle.yaml`.
        Trivial,
        /// `bundle::load_path` on the generated bundle, and how the module changes.
        Bundle { module: ModuleChange },
    }

    pub fn main() -> ExitCode {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let flag = |name: &str| args.iter().any(|a| a == name);
        let build = if flag("--bundle") {
            Build::Bundle {
                module: if flag("--new-code") {
                    ModuleChange::Code
                } else if flag("--new-module") {
                    ModuleChange::Bytes
                } else {
                    ModuleChange::None
                },
            }
        } else {
            Build::Trivial
        };
        let mut numbers = args.iter().filter(|a| !a.starts_with("--"));
        let changes: u32 = numbers.next().and_then(|a| a.parse().ok()).unwrap_or(200);
        let debounce = numbers
            .next()
            .and_then(|a| a.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_DEBOUNCE);
        let result = match build {
            Build::Trivial => run(changes, debounce, build, read_bundle),
            Build::Bundle { .. } => match Runtime::new() {
                Ok(runtime) => run(changes, debounce, build, move |dir: &Path| {
                    bundle::load_path(dir, &runtime, &LoadOptions::default())
                }),
                Err(e) => Err(e.into()),
            },
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("reload-latency: {error}");
                ExitCode::FAILURE
            }
        }
    }

    fn run<T, E>(
        changes: u32,
        debounce: Duration,
        build: Build,
        load: impl Fn(&Path) -> Result<T, E> + Send + 'static,
    ) -> Result<(), Box<dyn std::error::Error>>
    where
        T: Loaded + Send + Sync + 'static,
        E: std::fmt::Display + Into<Box<dyn std::error::Error>>,
    {
        let module = fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("policies/plugins")
                .join(MODULE),
        )?;
        if build
            == (Build::Bundle {
                module: ModuleChange::Code,
            })
        {
            with_changed_constant(&module, 1)?;
        }
        let files = |serial: u32| -> Vec<(&'static str, Vec<u8>)> {
            match build {
                Build::Trivial => vec![("bundle.yaml", format!("{serial}").into_bytes())],
                Build::Bundle { module: change } => vec![
                    ("bundle.yaml", generated_bundle(serial).into_bytes()),
                    (
                        MODULE,
                        match change {
                            ModuleChange::None => module.clone(),
                            ModuleChange::Bytes => {
                                with_custom_section(&module, &format!("update {serial}"))
                            }
                            // Checked below before the first update.
                            ModuleChange::Code => with_changed_constant(&module, serial)
                                .unwrap_or_else(|_| module.clone()),
                        },
                    ),
                ],
            }
        };
        let update = |dir: &Path, serial: u32| {
            let files = files(serial);
            let files: Vec<(&str, &[u8])> = files.iter().map(|(n, c)| (*n, c.as_slice())).collect();
            kubelet_update(dir, serial, &files)
        };
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().to_path_buf();
        update(&dir, 0)?;
        let first = Instant::now();
        let bundles = Arc::new(Reloadable::new(load(&dir).map_err(Into::into)?));
        let first = first.elapsed();
        let (tx, done) = mpsc::channel();
        let _watcher = DirWatcher::spawn(&dir, debounce, {
            let bundles = Arc::clone(&bundles);
            let dir = dir.clone();
            move || {
                let called = Instant::now();
                match bundles.reload_with(|| load(&dir)) {
                    ReloadOutcome::Swapped { identity, .. } => {
                        let _ = tx.send(Ok((identity.version, called, Instant::now())));
                    }
                    ReloadOutcome::Unchanged { .. } => {}
                    other => {
                        let _ = tx.send(Err(format!("{other:?}")));
                    }
                }
            }
        })?;
        let mut to_callback = Vec::new();
        let mut to_in_force = Vec::new();
        let mut building = Vec::new();
        for serial in 1..=changes {
            let want = format!("{serial}");
            let changed = Instant::now();
            update(&dir, serial)?;
            loop {
                let (version, called, swapped) = done.recv_timeout(Duration::from_secs(10))??;
                if version == want {
                    to_callback.push(called - changed);
                    to_in_force.push(swapped - changed);
                    building.push(swapped - called);
                    break;
                }
            }
        }
        match build {
            Build::Trivial => println!("build: read bundle.yaml"),
            Build::Bundle { module } => println!(
                "build: bundle::load_path, 20 policies (16 CEL, 4 WASM), 6 tests; {}; first load {:.2} ms",
                match module {
                    ModuleChange::None => "the module unchanged",
                    ModuleChange::Bytes => "a new module every update (same code)",
                    ModuleChange::Code => "a new module every update (a constant in its code changed)",
                },
                first.as_secs_f64() * 1e3
            ),
        }
        println!("{changes} ConfigMap-style updates, debounce {debounce:?}");
        report("change -> on_change called", to_callback);
        report("on_change -> swapped (build)", building);
        report("change -> new bundle in force", to_in_force);
        Ok(())
    }
}
