//! The bundles in force as the policy engine reports them: the
//! `arbiter_policy_bundle_info` and `arbiter_policy_bundle_last_reload_success`
//! series of the admin port's registry, read back from its text. This
//! covers the bundles of `--policies` directories, which have no ConfigMap
//! to carry a status annotation.

use std::collections::BTreeMap;

use serde::Serialize;

/// One bundle source the engine has in force.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EngineBundle {
    /// The directory or `ConfigMap namespace/name` it is loaded from.
    pub source: String,
    pub name: String,
    pub version: String,
    pub digest: String,
    /// Whether the latest reload of the source succeeded (or found it
    /// unchanged); `false`: a newer version was rejected, this one stays.
    pub last_reload_ok: Option<bool>,
}

/// The labels of a sample line `name{a="x",b="y"} value`, and its value.
fn sample(line: &str) -> Option<(&str, BTreeMap<String, String>, &str)> {
    let (name, rest) = line.split_once('{')?;
    let mut labels = BTreeMap::new();
    let mut chars = rest.char_indices();
    let mut key = String::new();
    loop {
        let (i, c) = chars.next()?;
        match c {
            '}' => return Some((name, labels, rest[i + 1..].trim())),
            ',' | ' ' => {}
            '=' => {
                if chars.next()?.1 != '"' {
                    return None;
                }
                let mut value = String::new();
                loop {
                    match chars.next()?.1 {
                        '"' => break,
                        '\\' => match chars.next()?.1 {
                            'n' => value.push('\n'),
                            other => value.push(other),
                        },
                        other => value.push(other),
                    }
                }
                labels.insert(std::mem::take(&mut key), value);
            }
            other => key.push(other),
        }
    }
}

/// The engine's bundles in force, from the registry's text, by source.
pub fn bundles(metrics_text: &str) -> Vec<EngineBundle> {
    let mut found: BTreeMap<String, EngineBundle> = BTreeMap::new();
    let mut last_ok: BTreeMap<String, bool> = BTreeMap::new();
    for line in metrics_text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, mut labels, value)) = sample(line) else {
            continue;
        };
        let Some(source) = labels.remove("bundle") else {
            continue;
        };
        let mut take = |key: &str| labels.remove(key).unwrap_or_default();
        match name {
            "arbiter_policy_bundle_info" if value.parse::<f64>() == Ok(1.0) => {
                found.insert(
                    source.clone(),
                    EngineBundle {
                        name: take("name"),
                        version: take("version"),
                        digest: take("digest"),
                        source,
                        last_reload_ok: None,
                    },
                );
            }
            "arbiter_policy_bundle_last_reload_success" => {
                last_ok.insert(source, value.parse::<f64>() == Ok(1.0));
            }
            _ => {}
        }
    }
    found
        .into_values()
        .map(|mut b| {
            b.last_reload_ok = last_ok.get(&b.source).copied();
            b
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundles_in_force_are_read_from_the_registry_text() {
        let text = r#"# HELP arbiter_policy_bundle_info The bundle in force
# TYPE arbiter_policy_bundle_info gauge
arbiter_policy_bundle_info{bundle="ConfigMap team-a/weights",name="team-a-weights",version="1",digest="sha256:ab"} 1
arbiter_policy_bundle_info{bundle="ConfigMap team-a/weights",name="team-a-weights",version="0",digest="sha256:00"} 0
arbiter_policy_bundle_info{bundle="/etc/arbiter/\"odd\" dir",name="platform",version="7",digest="sha256:cd"} 1
arbiter_policy_bundle_last_reload_success{bundle="/etc/arbiter/\"odd\" dir"} 0
arbiter_policy_bundle_last_reload_success{bundle="ConfigMap team-a/weights"} 1
arbiter_pending_workloads{cluster_queue="research",status="active"} 1
"#;
        let found = bundles(text);
        assert_eq!(
            found,
            [
                EngineBundle {
                    source: "/etc/arbiter/\"odd\" dir".into(),
                    name: "platform".into(),
                    version: "7".into(),
                    digest: "sha256:cd".into(),
                    last_reload_ok: Some(false),
                },
                EngineBundle {
                    source: "ConfigMap team-a/weights".into(),
                    name: "team-a-weights".into(),
                    version: "1".into(),
                    digest: "sha256:ab".into(),
                    last_reload_ok: Some(true),
                },
            ]
        );
        assert!(bundles("").is_empty());
        assert!(bundles("arbiter_policy_bundle_info{bundle=\"x\" 1").is_empty());
    }
}
