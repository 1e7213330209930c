//! `arbiter crds`: the CustomResourceDefinitions of the `arbiter.dev`
//! kinds (the six of docs/design.md §2, Topology and MultiKueue's three),
//! generated from the Rust wire types in `model::api` so the cluster
//! and the code can never disagree. `deploy/crds.yaml` is this output,
//! checked by a test. Pure: builds a string, never writes or reads a file;
//! the CLI prints it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceValidation,
    JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;
use serde_json::Value;

use arbiter_core::model::api;

/// All CRDs: the six in docs/design.md §2 order, then Topology (Kueue's,
/// for topology-aware placement), then MultiKueue's (multi-cluster dispatch).
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        api::ResourceFlavor::crd(),
        api::Cohort::crd(),
        api::ClusterQueue::crd(),
        api::LocalQueue::crd(),
        workload_priority_class_crd(),
        api::Workload::crd(),
        topology_crd(),
        api::AdmissionCheck::crd(),
        api::MultiKueueConfig::crd(),
        api::MultiKueueCluster::crd(),
    ]
}

/// The CRDs as one multi-document YAML stream, as `arbiter crds` prints it.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| {
            serde_yaml_ng::to_string(crd)
                .expect("a CustomResourceDefinition built in code always serializes")
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The schema of a top-level wire type `T` with the settings kube's derive
/// uses; apiVersion, kind and metadata left to the API server.
fn schema_of<T: schemars::JsonSchema>() -> JSONSchemaProps {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    // apiVersion, kind and metadata are validated by the API server itself.
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for field in ["apiVersion", "kind", "metadata"] {
            properties.remove(field);
        }
    }
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
    }
    serde_json::from_value(schema).expect("a wire type's schema is a valid JSONSchemaProps")
}

/// A cluster-scoped `arbiter.dev/v1alpha1` CRD of `kind` (plural
/// `plural`) with `schema`, built by hand for a kind that is not a
/// `#[derive(CustomResource)]` type.
fn cluster_crd(
    kind: &str,
    plural: &str,
    schema: JSONSchemaProps,
    columns: Vec<CustomResourceColumnDefinition>,
) -> CustomResourceDefinition {
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{}", api::GROUP)),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: api::GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: kind.into(),
                plural: plural.into(),
                singular: Some(kind.to_lowercase()),
                categories: Some(vec!["arbiter".into()]),
                ..Default::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1alpha1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                additional_printer_columns: (!columns.is_empty()).then_some(columns),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// WorkloadPriorityClass has no `spec` (as in Kueue: `value`, `description`
/// and `weight` are top-level), so it is not a `#[derive(CustomResource)]`
/// type; its CRD is built here with the same schema settings kube's derive
/// uses.
fn workload_priority_class_crd() -> CustomResourceDefinition {
    cluster_crd(
        "WorkloadPriorityClass",
        "workloadpriorityclasses",
        schema_of::<api::WorkloadPriorityClass>(),
        vec![
            CustomResourceColumnDefinition {
                name: "Value".into(),
                type_: "integer".into(),
                json_path: ".value".into(),
                ..Default::default()
            },
            CustomResourceColumnDefinition {
                name: "Weight".into(),
                type_: "number".into(),
                json_path: ".weight".into(),
                ..Default::default()
            },
        ],
    )
}

/// Topology is Kueue's wire type, read under Kueue's group as well, so it
/// is not a `#[derive(CustomResource)]` type either (cluster-scoped, as
/// Kueue's).
fn topology_crd() -> CustomResourceDefinition {
    cluster_crd(
        "Topology",
        "topologies",
        schema_of::<api::Topology>(),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the apiextensions.k8s.io/v1 structural-schema rules the API
    /// server enforces: every node has a `type` (or is int-or-string /
    /// preserve-unknown-fields), no `$ref` or definitions, value-validation
    /// only inside `anyOf`/`oneOf`/`allOf`/`not`, and `properties` never
    /// together with `additionalProperties`.
    fn structural_violations(
        node: &Value,
        path: &str,
        inside_junctor: bool,
        out: &mut Vec<String>,
    ) {
        let Some(object) = node.as_object() else {
            out.push(format!("{path}: schema is not an object"));
            return;
        };
        for forbidden in ["$ref", "$defs", "definitions", "$schema"] {
            if object.contains_key(forbidden) {
                out.push(format!("{path}: has {forbidden}"));
            }
        }
        let typed = object.contains_key("type")
            || object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
            || object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        if inside_junctor {
            for field in [
                "type",
                "description",
                "default",
                "nullable",
                "additionalProperties",
            ] {
                if object.contains_key(field) {
                    out.push(format!("{path}: `{field}` inside anyOf/oneOf/allOf/not"));
                }
            }
        } else if !typed {
            out.push(format!("{path}: no type"));
        }
        if object.contains_key("properties") && object.contains_key("additionalProperties") {
            out.push(format!("{path}: both properties and additionalProperties"));
        }
        if let Some(properties) = object.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                structural_violations(child, &format!("{path}.{name}"), inside_junctor, out);
            }
        }
        if let Some(items) = object.get("items") {
            structural_violations(items, &format!("{path}[]"), inside_junctor, out);
        }
        if let Some(extra) = object.get("additionalProperties").filter(|v| v.is_object()) {
            structural_violations(extra, &format!("{path}{{}}"), inside_junctor, out);
        }
        for junctor in ["anyOf", "oneOf", "allOf"] {
            for (i, child) in object
                .get(junctor)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                structural_violations(child, &format!("{path}.{junctor}[{i}]"), true, out);
            }
        }
        if let Some(child) = object.get("not") {
            structural_violations(child, &format!("{path}.not"), true, out);
        }
    }

    #[test]
    fn ten_crds_for_the_arbiter_group() {
        let crds = crds();
        let kinds: Vec<(&str, &str)> = crds
            .iter()
            .map(|c| (c.spec.names.kind.as_str(), c.spec.scope.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("ResourceFlavor", "Cluster"),
                ("Cohort", "Cluster"),
                ("ClusterQueue", "Cluster"),
                ("LocalQueue", "Namespaced"),
                ("WorkloadPriorityClass", "Cluster"),
                ("Workload", "Namespaced"),
                ("Topology", "Cluster"),
                ("AdmissionCheck", "Cluster"),
                ("MultiKueueConfig", "Cluster"),
                ("MultiKueueCluster", "Cluster"),
            ]
        );
        for crd in &crds {
            assert_eq!(crd.spec.group, "arbiter.dev");
            let name = crd.metadata.name.clone().unwrap_or_default();
            assert_eq!(name, format!("{}.arbiter.dev", crd.spec.names.plural));
        }
    }

    #[test]
    fn schemas_are_structural() {
        let mut violations = Vec::new();
        for crd in crds() {
            for version in &crd.spec.versions {
                let schema = version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .map(serde_json::to_value);
                match schema {
                    Some(Ok(schema)) => {
                        structural_violations(&schema, &crd.spec.names.kind, false, &mut violations)
                    }
                    _ => violations.push(format!("{}: no schema", crd.spec.names.kind)),
                }
            }
        }
        assert!(violations.is_empty(), "{violations:#?}");
    }

    #[test]
    fn quantities_are_int_or_string_and_priority_class_is_top_level() {
        let yaml = crds_yaml();
        let crds: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|doc| serde::Deserialize::deserialize(doc).unwrap_or(Value::Null))
            .collect();
        let schema = |i: usize| crds[i].pointer("/spec/versions/0/schema/openAPIV3Schema");
        let quota = schema(2).and_then(|s| {
            s.pointer("/properties/spec/properties/resourceGroups/items/properties/flavors/items/properties/resources/items/properties/nominalQuota")
        });
        assert_eq!(
            quota.and_then(|q| q.get("x-kubernetes-int-or-string")),
            Some(&Value::Bool(true))
        );
        let value = schema(4).and_then(|s| s.pointer("/properties/value/type"));
        assert_eq!(value, Some(&Value::String("integer".into())));
        assert!(schema(4)
            .and_then(|s| s.pointer("/properties/spec"))
            .is_none());
    }

    #[test]
    fn deploy_crds_yaml_is_up_to_date() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds.yaml");
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == crds_yaml(),
            "{} differs from `arbiter crds`; regenerate it with `cargo run -q -- crds > deploy/crds.yaml`",
            path.display()
        );
    }
}
