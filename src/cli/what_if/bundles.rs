//! The bundles of the two replays. In force: the ConfigMaps labelled
//! `arbiter.dev/policy-bundle` the operator puts in force
//! (`operator::policy_sources::in_force`: the platform ones in its namespace by
//! name, each other namespace's oldest as its tenant bundle), each loaded
//! as the operator loads it (`load_as`). The candidate: those, with the
//! platform bundles replaced by `--policies` (directories or ConfigMap
//! files) and a tenant's bundle by `--tenant-policies NS=DIR`, or none at
//! all with `--no-policies`. A candidate that does not load is an error
//! naming its path; a ConfigMap in force that does not load is a warning
//! (the operator keeps an earlier version of it, or none, which the
//! cluster does not show).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arbiter_operator::policy_sources::{in_force, load_as, STATUS_ANNOTATION};
use arbiter_policy::bundle::{self, Bundle, LoadOptions};
use arbiter_policy::engine::{Engine, Sources};
use arbiter_policy::reload::Reloadable;
use arbiter_policy::sources::PolicySetupError;
use arbiter_policy::wasm::Runtime;
use k8s_openapi::api::core::v1::ConfigMap;

/// A set of bundles a replay runs under.
#[derive(Clone, Default)]
pub struct BundleSet {
    pub platform: Vec<Arc<Reloadable<Bundle>>>,
    pub tenants: BTreeMap<String, Arc<Reloadable<Bundle>>>,
}

impl BundleSet {
    /// A fresh engine over the set (each replay keeps its own decisions
    /// and statistics); `None` when it holds no bundle (Kueue's behaviour).
    pub fn engine(&self) -> Option<Engine> {
        if self.platform.is_empty() && self.tenants.is_empty() {
            return None;
        }
        Some(Engine::new(Sources {
            platform: self.platform.clone(),
            tenants: self.tenants.clone(),
        }))
    }
}

/// The bundles in force in the cluster, and a warning for each ConfigMap
/// that does not load or is ignored.
pub fn from_cluster(
    configmaps: &[ConfigMap],
    platform_namespace: &str,
    runtime: &Runtime,
) -> (BundleSet, Vec<String>) {
    let (chosen, ignored) = in_force(configmaps, platform_namespace);
    let mut set = BundleSet::default();
    let mut warnings = Vec::new();
    for entry in chosen {
        match load_as(entry.configmap, runtime, entry.tenant.as_deref()) {
            Ok(bundle) => {
                let source = Arc::new(Reloadable::new(bundle));
                match entry.tenant {
                    Some(tenant) => {
                        set.tenants.insert(tenant, source);
                    }
                    None => set.platform.push(source),
                }
            }
            Err(error) => {
                let status = entry
                    .configmap
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(STATUS_ANNOTATION))
                    .map(|s| format!("; the operator's status on it: {s}"))
                    .unwrap_or_default();
                warnings.push(format!(
                    "{} does not load ({error}){status}; replayed without it (the operator may still hold an earlier version)",
                    entry.source
                ));
            }
        }
    }
    for (ignored, used) in ignored {
        warnings.push(format!(
            "{ignored} is ignored: {used} is its namespace's tenant bundle (the oldest)"
        ));
    }
    (set, warnings)
}

/// What the candidate changes, as the command line gives it.
pub struct Candidate {
    /// Platform bundles in place of those in force (`None`: those in force stay).
    pub platform: Option<Vec<PathBuf>>,
    pub tenants: Vec<(String, PathBuf)>,
    /// No bundle at all.
    pub none: bool,
}

/// The candidate's own bundles, loaded (before the cluster is read, so a
/// bundle that does not load is told at once).
pub struct LoadedCandidate {
    platform: Option<Vec<Arc<Reloadable<Bundle>>>>,
    tenants: Vec<(String, Arc<Reloadable<Bundle>>)>,
    none: bool,
}

/// Loads the candidate's bundles; an error names the bundle's path and
/// what is wrong in it.
pub fn load_candidate(
    candidate: &Candidate,
    runtime: &Runtime,
) -> Result<LoadedCandidate, PolicySetupError> {
    let load = |path: &PathBuf, tenant: Option<&String>| {
        let options = LoadOptions {
            tenant: tenant.cloned(),
            run_tests: true,
        };
        bundle::load_path(path, runtime, &options).map_err(|error| PolicySetupError::Bundle {
            path: path.display().to_string(),
            error,
        })
    };
    let platform = match &candidate.platform {
        Some(paths) => {
            let mut loaded = Vec::new();
            for path in paths {
                let b = load(path, None)?;
                if let Some(tenant) = &b.tenant {
                    return Err(PolicySetupError::TenantAsPlatform {
                        path: path.display().to_string(),
                        tenant: tenant.clone(),
                    });
                }
                loaded.push(Arc::new(Reloadable::new(b)));
            }
            Some(loaded)
        }
        None => None,
    };
    let mut tenants = Vec::new();
    for (ns, path) in &candidate.tenants {
        if tenants.iter().any(|(t, _)| t == ns) {
            return Err(PolicySetupError::DuplicateTenant(ns.clone()));
        }
        tenants.push((ns.clone(), Arc::new(Reloadable::new(load(path, Some(ns))?))));
    }
    Ok(LoadedCandidate {
        platform,
        tenants,
        none: candidate.none,
    })
}

impl LoadedCandidate {
    /// The candidate's set: `in_force` with what it replaces replaced.
    pub fn over(&self, in_force: &BundleSet) -> BundleSet {
        if self.none {
            return BundleSet::default();
        }
        let mut set = in_force.clone();
        if let Some(platform) = &self.platform {
            set.platform = platform.clone();
        }
        for (ns, bundle) in &self.tenants {
            set.tenants.insert(ns.clone(), bundle.clone());
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    fn bundle_yaml(name: &str, expression: &str) -> String {
        format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {name}, version: \"1\"}}\nspec:\n  policies:\n  - {{name: p, hook: admission, cel: {{expression: '{expression}'}}}}\n"
        )
    }

    fn configmap(namespace: &str, name: &str, created: i64, yaml: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                creation_timestamp: Some(Time(
                    Timestamp::from_second(created).unwrap_or_else(|e| panic!("{e}")),
                )),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "bundle.yaml".to_string(),
                yaml.to_string(),
            )])),
            ..ConfigMap::default()
        }
    }

    fn names(set: &BundleSet) -> (Vec<String>, Vec<(String, String)>) {
        (
            set.platform
                .iter()
                .map(|b| b.current().name.clone())
                .collect(),
            set.tenants
                .iter()
                .map(|(ns, b)| (ns.clone(), b.current().name.clone()))
                .collect(),
        )
    }

    #[test]
    fn the_bundles_in_force_are_the_operators_and_the_candidate_replaces_what_it_names() {
        let runtime = Runtime::new().unwrap_or_else(|e| panic!("{e}"));
        let configmaps = [
            configmap("arbiter-system", "b", 2, &bundle_yaml("second", "true")),
            configmap("arbiter-system", "a", 3, &bundle_yaml("first", "true")),
            configmap("arbiter-system", "broken", 1, "not: [a bundle"),
            configmap("team-a", "newer", 9, &bundle_yaml("team-a-newer", "true")),
            configmap("team-a", "older", 8, &bundle_yaml("team-a-older", "true")),
        ];
        let (set, warnings) = from_cluster(&configmaps, "arbiter-system", &runtime);
        assert_eq!(
            names(&set),
            (
                vec!["first".to_string(), "second".to_string()],
                vec![("team-a".to_string(), "team-a-older".to_string())]
            )
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("ConfigMap arbiter-system/broken does not load")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("ConfigMap team-a/newer is ignored")),
            "{warnings:?}"
        );

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join("bundle.yaml"),
            bundle_yaml("candidate", "true"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let candidate = Candidate {
            platform: Some(vec![dir.path().to_path_buf()]),
            tenants: Vec::new(),
            none: false,
        };
        let loaded = load_candidate(&candidate, &runtime).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            names(&loaded.over(&set)),
            (
                vec!["candidate".to_string()],
                vec![("team-a".to_string(), "team-a-older".to_string())]
            )
        );
        let none = Candidate {
            platform: None,
            tenants: Vec::new(),
            none: true,
        };
        let loaded = load_candidate(&none, &runtime).unwrap_or_else(|e| panic!("{e}"));
        assert!(loaded.over(&set).engine().is_none());
    }

    #[test]
    fn a_candidate_that_does_not_load_names_its_file() {
        let runtime = Runtime::new().unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("bundle.yaml"), "apiVersion: [")
            .unwrap_or_else(|e| panic!("{e}"));
        let candidate = Candidate {
            platform: Some(vec![dir.path().to_path_buf()]),
            tenants: Vec::new(),
            none: false,
        };
        let error = match load_candidate(&candidate, &runtime) {
            Ok(_) => panic!("a broken bundle loaded"),
            Err(e) => e.to_string(),
        };
        assert!(
            error.contains(&dir.path().display().to_string()) && error.contains("bundle.yaml"),
            "{error}"
        );
    }
}
