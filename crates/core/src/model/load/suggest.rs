//! Suggestions for unknown fields: the field a misplaced or misspelt one
//! was probably meant to be, found in the type's JSON schema (the one the
//! CRDs are generated from) by edit distance and by looking nearby.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde_json::Value;

use super::{format_path, Segment};

/// Finds the field a misplaced or misspelt one was probably meant to be,
/// from the type's JSON schema.
pub(super) struct Suggester {
    root: Value,
    metadata: Value,
}

impl Suggester {
    pub(super) fn new<T: JsonSchema>() -> Suggester {
        let generator = || {
            schemars::generate::SchemaSettings::draft2020_12()
                .with(|s| s.inline_subschemas = true)
                .into_generator()
        };
        Suggester {
            root: generator().into_root_schema_for::<T>().to_value(),
            metadata: generator().into_root_schema_for::<ObjectMeta>().to_value(),
        }
    }

    /// `path` is the ignored field; the answer is a path in YAML terms.
    pub(super) fn suggest(&self, path: &[Segment]) -> Option<String> {
        let (Segment::Key(name), parent) = path.split_last()? else {
            return None;
        };
        let (root, parent_nodes) = match parent.first() {
            Some(Segment::Key(k)) if k == "metadata" && !self.has_metadata() => {
                (&self.metadata, self.walk(&self.metadata, &parent[1..]))
            }
            _ => (&self.root, self.walk(&self.root, parent)),
        };
        let prefix = format_path(parent);
        let join = |rest: &str| {
            if prefix.is_empty() {
                rest.to_string()
            } else {
                format!("{prefix}.{rest}")
            }
        };
        // A misspelling of a field at this level.
        let mut best: Option<(usize, String)> = None;
        for node in &parent_nodes {
            for candidate in property_names(root, node) {
                let distance = edit_distance(&name.to_lowercase(), &candidate.to_lowercase());
                let allowed = if name.len() >= 6 { 2 } else { 1 };
                if distance <= allowed && best.as_ref().is_none_or(|(d, _)| distance < *d) {
                    best = Some((distance, candidate));
                }
            }
        }
        if let Some((_, candidate)) = best {
            return Some(join(&candidate));
        }
        // The right field at the wrong depth: it exists one or two levels down.
        for node in &parent_nodes {
            if let Some(rest) = find_below(root, node, name, 2) {
                return Some(join(&rest));
            }
        }
        None
    }

    fn has_metadata(&self) -> bool {
        self.root.pointer("/properties/metadata").is_some()
    }

    /// The schema nodes that describe the value at `path`.
    fn walk<'a>(&self, root: &'a Value, path: &[Segment]) -> Vec<&'a Value> {
        let mut nodes = alternatives(root, root);
        for segment in path {
            let mut next = Vec::new();
            for node in nodes {
                let child = match segment {
                    Segment::Key(key) => node
                        .pointer(&format!("/properties/{}", escape_pointer(key)))
                        .or_else(|| node.get("additionalProperties").filter(|v| v.is_object())),
                    Segment::Index(_) => node.get("items"),
                };
                if let Some(child) = child {
                    next.extend(alternatives(root, child));
                }
            }
            nodes = next;
        }
        nodes
    }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A node and, through `$ref`, `anyOf`, `oneOf` and `allOf`, every schema it
/// may stand for.
fn alternatives<'a>(root: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    let mut out = Vec::new();
    let mut stack = vec![(node, 0)];
    while let Some((node, depth)) = stack.pop() {
        if depth > 8 {
            continue;
        }
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(reference) => match reference.strip_prefix('#') {
                Some(pointer) => match root.pointer(pointer) {
                    Some(target) => target,
                    None => continue,
                },
                None => continue,
            },
            None => node,
        };
        out.push(node);
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(list) = node.get(key).and_then(Value::as_array) {
                stack.extend(list.iter().map(|n| (n, depth + 1)));
            }
        }
    }
    out
}

fn property_names(root: &Value, node: &Value) -> Vec<String> {
    alternatives(root, node)
        .into_iter()
        .filter_map(|n| n.get("properties").and_then(Value::as_object))
        .flat_map(|props| props.keys().cloned())
        .collect()
}

/// Path (relative, `[]` for lists) to a property called `name` at most
/// `depth` objects below `node`.
fn find_below(root: &Value, node: &Value, name: &str, depth: usize) -> Option<String> {
    if depth == 0 {
        return None;
    }
    for node in alternatives(root, node) {
        let Some(props) = node.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (key, child) in props {
            for child in alternatives(root, child) {
                let (child, list) = match child.get("items") {
                    Some(items) => (items, "[]"),
                    None => (child, ""),
                };
                if property_names(root, child).iter().any(|p| p == name) {
                    return Some(format!("{key}{list}.{name}"));
                }
                if let Some(rest) = find_below(root, child, name, depth - 1) {
                    return Some(format!("{key}{list}.{rest}"));
                }
            }
        }
    }
    None
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("cohort", "cohort"), 0);
        assert_eq!(edit_distance("cohrt", "cohort"), 1);
        assert_eq!(edit_distance("abc", "xyz"), 3);
    }
}
