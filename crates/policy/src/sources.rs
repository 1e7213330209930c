//! Which bundles are in force for a run, and the engine over them: the
//! platform bundles a run names (or the defaults it is given — for the
//! simulator, the Simulation's `spec.policies`), the tenant bundles by
//! namespace, or none at all (Kueue's behaviour). [`engine`] loads each one
//! through the bundle loader, refuses a tenant bundle given as a platform
//! one and a second bundle for one tenant, and builds a fixed [`Engine`].
//! Called by the CLI (`arbiter simulate`), the golden test, the scheduler
//! bench and the `kueue-perf` example. It knows nothing about scenarios or the
//! simulator: the defaults come in as plain paths. It never watches or
//! reloads a bundle (`reload` does), and every error names the bundle's path.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::bundle::{self, BundleError, LoadOptions};
use super::engine::Engine;
use super::wasm::Runtime;

/// Which bundles a run uses.
#[derive(Clone, Debug, Default)]
pub struct PolicyChoice {
    /// Platform bundles; `None`: the defaults (the Simulation's `spec.policies`).
    pub platform: Option<Vec<PathBuf>>,
    /// Tenant bundles: namespace → bundle.
    pub tenants: Vec<(String, PathBuf)>,
    /// No bundles at all (Kueue's behaviour).
    pub none: bool,
}

impl PolicyChoice {
    /// The platform bundles in force: none with `none`, else those chosen,
    /// else `defaults`.
    pub fn platform<'a>(&'a self, defaults: &'a [PathBuf]) -> &'a [PathBuf] {
        match (&self.platform, self.none) {
            (_, true) => &[],
            (Some(paths), false) => paths,
            (None, false) => defaults,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicySetupError {
    #[error("starting the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("loading the policy bundle {path}: {error}")]
    Bundle { path: String, error: BundleError },
    #[error(
        "{path} is the tenant bundle of {tenant}; pass it as --tenant-policies {tenant}={path}"
    )]
    TenantAsPlatform { path: String, tenant: String },
    #[error("two tenant bundles for {0}; give one bundle per tenant")]
    DuplicateTenant(String),
}

/// The engine over the bundles `choice` puts in force, `defaults` being
/// the platform bundles when it names none; `None` when no bundle is in
/// force.
pub fn engine(
    defaults: &[PathBuf],
    choice: &PolicyChoice,
) -> Result<Option<Engine>, PolicySetupError> {
    let platform = choice.platform(defaults);
    if platform.is_empty() && choice.tenants.is_empty() {
        return Ok(None);
    }
    let runtime = Runtime::new().map_err(|e| PolicySetupError::Runtime(e.to_string()))?;
    let mut bundles = Vec::new();
    for path in platform {
        let shown = path.display().to_string();
        let b = bundle::load_path(path, &runtime, &LoadOptions::default()).map_err(|error| {
            PolicySetupError::Bundle {
                path: shown.clone(),
                error,
            }
        })?;
        if let Some(tenant) = &b.tenant {
            return Err(PolicySetupError::TenantAsPlatform {
                path: shown,
                tenant: tenant.clone(),
            });
        }
        bundles.push(b);
    }
    let mut tenants = BTreeMap::new();
    for (ns, path) in &choice.tenants {
        let options = LoadOptions {
            tenant: Some(ns.clone()),
            run_tests: true,
        };
        let b = bundle::load_path(path, &runtime, &options).map_err(|error| {
            PolicySetupError::Bundle {
                path: path.display().to_string(),
                error,
            }
        })?;
        if tenants.insert(ns.clone(), b).is_some() {
            return Err(PolicySetupError::DuplicateTenant(ns.clone()));
        }
    }
    Ok(Some(Engine::fixed(bundles, tenants)))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Writes a bundle named `name` (a tenant bundle with `tenant`) holding
    /// one admission policy into `dir`.
    fn write_bundle(dir: &Path, name: &str, tenant: Option<&str>) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let tenant = tenant.map_or(String::new(), |t| format!("  tenant: {t}\n"));
        std::fs::write(
            dir.join("bundle.yaml"),
            format!(
                "apiVersion: arbiter.dev/v1alpha1\nkind: PolicyBundle\nmetadata: {{name: {name}, version: \"1\"}}\nspec:\n{tenant}  policies:\n  - {{name: small, hook: admission, cel: {{expression: 'workload.gpus <= 8'}}}}\n"
            ),
        )
        .unwrap();
        dir.to_path_buf()
    }

    fn error(defaults: &[PathBuf], choice: &PolicyChoice) -> String {
        match engine(defaults, choice) {
            Ok(_) => panic!("the bundles loaded but should not have"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn platform_bundles_are_the_chosen_ones_else_the_defaults_and_none_with_none() {
        let defaults = [PathBuf::from("spec/policies")];
        let chosen = vec![PathBuf::from("a"), PathBuf::from("b")];
        assert_eq!(PolicyChoice::default().platform(&defaults), &defaults);
        let given = PolicyChoice {
            platform: Some(chosen.clone()),
            ..PolicyChoice::default()
        };
        assert_eq!(given.platform(&defaults), chosen.as_slice());
        let none = PolicyChoice {
            platform: Some(chosen),
            none: true,
            ..PolicyChoice::default()
        };
        assert!(none.platform(&defaults).is_empty());
    }

    #[test]
    fn without_a_bundle_in_force_there_is_no_engine_and_nothing_is_read() {
        assert!(engine(&[], &PolicyChoice::default()).unwrap().is_none());
        let none = PolicyChoice {
            none: true,
            ..PolicyChoice::default()
        };
        let missing = [PathBuf::from("/nonexistent/bundle")];
        assert!(engine(&missing, &none).unwrap().is_none());
    }

    #[test]
    fn platform_then_tenant_bundles_make_one_engine() {
        let dir = tempfile::tempdir().unwrap();
        let platform = write_bundle(&dir.path().join("platform"), "base", None);
        let tenant = write_bundle(&dir.path().join("dev"), "dev-rules", None);
        let choice = PolicyChoice {
            tenants: vec![("development".into(), tenant)],
            ..PolicyChoice::default()
        };
        let engine = engine(&[platform], &choice).unwrap().unwrap();
        let bundles: Vec<(String, Option<String>)> = engine
            .bundles()
            .iter()
            .map(|b| (b.name.clone(), b.tenant.clone()))
            .collect();
        assert_eq!(
            bundles,
            [
                ("base".to_string(), None),
                ("dev-rules".to_string(), Some("development".to_string()))
            ]
        );
    }

    #[test]
    fn a_bundle_that_does_not_load_is_named_by_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = error(std::slice::from_ref(&missing), &PolicyChoice::default());
        let shown = missing.display();
        assert_eq!(
            e,
            format!(
                "loading the policy bundle {shown}: {shown}: is neither a bundle directory nor a ConfigMap file; give a directory holding bundle.yaml"
            )
        );
        let tenant = PolicyChoice {
            tenants: vec![("development".into(), missing.clone())],
            ..PolicyChoice::default()
        };
        assert!(
            error(&[], &tenant).starts_with(&format!("loading the policy bundle {shown}: ")),
            "{}",
            error(&[], &tenant)
        );
    }

    #[test]
    fn a_tenant_bundle_given_as_a_platform_one_says_which_flag_to_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_bundle(dir.path(), "dev", Some("development"));
        let shown = path.display();
        assert_eq!(
            error(std::slice::from_ref(&path), &PolicyChoice::default()),
            format!(
                "{shown} is the tenant bundle of development; pass it as --tenant-policies development={shown}"
            )
        );
    }

    #[test]
    fn two_bundles_for_one_tenant_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_bundle(&dir.path().join("one"), "one", None);
        let second = write_bundle(&dir.path().join("two"), "two", None);
        let choice = PolicyChoice {
            tenants: vec![
                ("development".into(), first),
                ("development".into(), second),
            ],
            ..PolicyChoice::default()
        };
        assert_eq!(
            error(&[], &choice),
            "two tenant bundles for development; give one bundle per tenant"
        );
    }
}
