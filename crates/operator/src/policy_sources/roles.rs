//! Which labelled ConfigMap is what (`Role`): every one in the operator's
//! namespace a platform bundle, in any other the oldest (creation time,
//! then name) its tenant bundle and the others ignored — and what one
//! ConfigMap's change may change ([`affected`]): it alone, or its whole
//! namespace when that namespace's oldest is another now. Pure; the
//! ConfigMap watcher (`watcher`) acts on it, and [`in_force`] gives the
//! same answer to a look at the cluster from outside.

use std::collections::BTreeMap;

use arbiter_policy::bundle::Bundle;
use arbiter_policy::wasm::Runtime;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;

use super::configmap::{load_configmap, Key, Role};

/// Which labelled ConfigMaps are bundles, and as what; and the tenant
/// ConfigMaps not used, each with the one used instead (the oldest by
/// creation time, then name). A ConfigMap's role depends only on those of
/// its own namespace.
pub(super) fn roles_of<'a>(
    objects: impl Iterator<Item = (&'a Key, &'a ConfigMap)>,
    platform_namespace: &str,
) -> (BTreeMap<Key, Role>, BTreeMap<Key, Key>) {
    let mut roles = BTreeMap::new();
    let mut by_tenant: BTreeMap<&str, Vec<(Option<Timestamp>, &Key)>> = BTreeMap::new();
    for (key, cm) in objects {
        if key.namespace == platform_namespace {
            roles.insert(key.clone(), Role::Platform);
        } else {
            by_tenant
                .entry(key.namespace.as_str())
                .or_default()
                .push(age(key, cm));
        }
    }
    let mut ignored = BTreeMap::new();
    for (tenant, mut candidates) in by_tenant {
        candidates.sort();
        let winner = candidates[0].1;
        roles.insert(winner.clone(), Role::Tenant(tenant.to_string()));
        for (_, other) in &candidates[1..] {
            ignored.insert((*other).clone(), winner.clone());
        }
    }
    (roles, ignored)
}

/// What orders a tenant's ConfigMaps, the oldest first: creation time, then name.
fn age<'a>(key: &'a Key, cm: &ConfigMap) -> (Option<Timestamp>, &'a Key) {
    (cm.metadata.creation_timestamp.as_ref().map(|t| t.0), key)
}

/// What one change of ConfigMap `key` may change, as [`roles`] says it:
/// the roles and the ConfigMaps ignored to look at, and whether that is
/// its whole namespace (a tenant's bundle ConfigMap changes: its oldest
/// is another now, or none) or `key` alone (a platform ConfigMap, or a
/// tenant's whose oldest stays): thousands of ConfigMaps in one namespace
/// cost each change of one of them a look for the oldest, no more.
pub(super) fn affected<V>(
    objects: &BTreeMap<Key, ConfigMap>,
    loaded: &BTreeMap<Key, V>,
    key: &Key,
    platform_namespace: &str,
) -> (BTreeMap<Key, Role>, BTreeMap<Key, Key>, bool) {
    let namespace = Some(key.namespace.as_str());
    let exists = objects.contains_key(key);
    let mut roles = BTreeMap::new();
    let mut ignored = BTreeMap::new();
    if key.namespace == platform_namespace {
        if exists {
            roles.insert(key.clone(), Role::Platform);
        }
        return (roles, ignored, false);
    }
    let oldest = in_namespace(objects, namespace)
        .map(|(k, cm)| age(k, cm))
        .min()
        .map(|(_, k)| k);
    let before = in_namespace(loaded, namespace).next().map(|(k, _)| k);
    match oldest {
        Some(oldest) if Some(oldest) == before => {
            if oldest == key {
                roles.insert(key.clone(), Role::Tenant(key.namespace.clone()));
            } else if exists {
                ignored.insert(key.clone(), oldest.clone());
            }
            (roles, ignored, false)
        }
        _ => {
            let (roles, ignored) = roles_of(in_namespace(objects, namespace), platform_namespace);
            (roles, ignored, true)
        }
    }
}

/// The entries of `map` in `namespace` (keys sort by namespace first), or
/// all of them.
pub(super) fn in_namespace<'a, V>(
    map: &'a BTreeMap<Key, V>,
    namespace: Option<&str>,
) -> Box<dyn Iterator<Item = (&'a Key, &'a V)> + 'a> {
    match namespace {
        None => Box::new(map.iter()),
        Some(ns) => {
            let ns = ns.to_string();
            let from = Key {
                namespace: ns.clone(),
                name: String::new(),
            };
            Box::new(
                map.range(from..)
                    .take_while(move |(k, _)| k.namespace == ns),
            )
        }
    }
}

/// A labelled ConfigMap the operator puts in force: `tenant` is the
/// namespace it is the tenant bundle of (`None`: a platform bundle).
#[derive(Clone, Debug)]
pub struct InForce<'a> {
    pub configmap: &'a ConfigMap,
    pub tenant: Option<String>,
    /// `ConfigMap namespace/name`, as the loader names the bundle's source.
    pub source: String,
}

/// Which of the labelled ConfigMaps `configmaps` the operator puts in
/// force, as the watch does (see the module docs): the platform ones by
/// name, then each tenant's oldest; and each one ignored, with the one in
/// force instead (`ConfigMap ns/name`). For a look at the cluster from
/// outside (`arbiter simulate --from-cluster`), which loads each with
/// [`load_as`].
pub fn in_force<'a>(
    configmaps: &'a [ConfigMap],
    platform_namespace: &str,
) -> (Vec<InForce<'a>>, Vec<(String, String)>) {
    let keyed: Vec<(Key, &ConfigMap)> = configmaps.iter().map(|cm| (Key::of(cm), cm)).collect();
    let (roles, ignored) = roles_of(keyed.iter().map(|(k, cm)| (k, *cm)), platform_namespace);
    let by_key: BTreeMap<&Key, &ConfigMap> = keyed.iter().map(|(k, cm)| (k, *cm)).collect();
    let mut platform = Vec::new();
    let mut tenants = Vec::new();
    for (key, role) in roles {
        let Some(&configmap) = by_key.get(&key) else {
            continue;
        };
        let entry = InForce {
            configmap,
            tenant: role.tenant(),
            source: key.source(),
        };
        match role {
            Role::Platform => platform.push(entry),
            Role::Tenant(_) => tenants.push(entry),
        }
    }
    platform.extend(tenants);
    let ignored = ignored
        .into_iter()
        .map(|(ignored, used)| (ignored.source(), used.source()))
        .collect();
    (platform, ignored)
}

/// Loads a bundle ConfigMap as the operator does: a platform bundle, or
/// `tenant`'s (under the tenant rules); the loader's error otherwise.
pub fn load_as(cm: &ConfigMap, runtime: &Runtime, tenant: Option<&str>) -> Result<Bundle, String> {
    let role = match tenant {
        Some(ns) => Role::Tenant(ns.to_string()),
        None => Role::Platform,
    };
    load_configmap(cm, runtime, &role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_sources::configmap::test_configmap;
    use crate::policy_sources::watcher::BuiltConfigMap;

    /// A ConfigMap with no data: roles read only names and creation times.
    fn configmap(namespace: &str, name: &str, created: i64) -> ConfigMap {
        test_configmap(namespace, name, created, &[])
    }

    fn key(namespace: &str, name: &str) -> Key {
        Key {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn platform_configmaps_all_apply_and_a_tenant_gets_its_oldest_one() {
        let objects: BTreeMap<Key, ConfigMap> = [
            configmap("arbiter-system", "b", 30),
            configmap("arbiter-system", "a", 40),
            configmap("team-a", "newer", 20),
            configmap("team-a", "older", 10),
            // Same time: the name decides.
            configmap("team-b", "zeta", 5),
            configmap("team-b", "alpha", 5),
            configmap("team-c", "only", 1),
        ]
        .into_iter()
        .map(|cm| (Key::of(&cm), cm))
        .collect();
        let (roles, ignored) = roles_of(objects.iter(), "arbiter-system");
        let tenant = |ns: &str| Role::Tenant(ns.into());
        assert_eq!(
            roles.into_iter().collect::<Vec<_>>(),
            [
                (key("arbiter-system", "a"), Role::Platform),
                (key("arbiter-system", "b"), Role::Platform),
                (key("team-a", "older"), tenant("team-a")),
                (key("team-b", "alpha"), tenant("team-b")),
                (key("team-c", "only"), tenant("team-c")),
            ]
        );
        assert_eq!(
            ignored.into_iter().collect::<Vec<_>>(),
            [
                (key("team-a", "newer"), key("team-a", "older")),
                (key("team-b", "zeta"), key("team-b", "alpha")),
            ]
        );
    }

    #[test]
    fn a_change_looks_at_its_configmap_alone_unless_its_namespace_has_another_oldest() {
        let mut objects: BTreeMap<Key, ConfigMap> = [
            configmap("arbiter-system", "p", 1),
            configmap("team-a", "old", 10),
            configmap("team-a", "new", 20),
            configmap("team-b", "only", 5),
        ]
        .into_iter()
        .map(|cm| (Key::of(&cm), cm))
        .collect();
        let tracked = || BuiltConfigMap {
            uid: String::new(),
            content: String::new(),
            source: None,
            status: String::new(),
            at: Timestamp::UNIX_EPOCH,
            untold: None,
        };
        let loaded: BTreeMap<Key, BuiltConfigMap> = [key("team-a", "old"), key("team-b", "only")]
            .into_iter()
            .map(|k| (k, tracked()))
            .collect();
        let of = |objects: &BTreeMap<Key, ConfigMap>, k: Key| {
            let (roles, ignored, whole) = affected(objects, &loaded, &k, "arbiter-system");
            (
                roles.into_keys().collect::<Vec<_>>(),
                ignored.into_iter().collect::<Vec<_>>(),
                whole,
            )
        };
        // A platform ConfigMap: itself.
        assert_eq!(
            of(&objects, key("arbiter-system", "p")),
            (vec![key("arbiter-system", "p")], vec![], false)
        );
        // The oldest stays: the one that changed alone, the tenant bundle or ignored.
        assert_eq!(
            of(&objects, key("team-a", "old")),
            (vec![key("team-a", "old")], vec![], false)
        );
        assert_eq!(
            of(&objects, key("team-a", "new")),
            (
                vec![],
                vec![(key("team-a", "new"), key("team-a", "old"))],
                false
            )
        );
        // An older one arrives: the whole namespace, a new oldest.
        let older = configmap("team-a", "older", 5);
        objects.insert(Key::of(&older), older);
        let (roles, ignored, whole) = of(&objects, key("team-a", "older"));
        assert!(whole);
        assert_eq!(roles, [key("team-a", "older")]);
        assert_eq!(ignored.len(), 2);
        // The last one of a namespace deleted: its whole namespace, nothing left.
        objects.remove(&key("team-b", "only"));
        assert_eq!(of(&objects, key("team-b", "only")), (vec![], vec![], true));
    }
}
