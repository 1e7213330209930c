//! Reading and writing the field that holds a job (`spec.suspend`,
//! `spec.runPolicy.suspend`, `spec.status`…), given as a dot-separated path.
//!
//! Only the path's own field is ever changed; a value in the way (a string
//! where the path needs an object) is an error, never overwritten. Pure JSON
//! manipulation, no I/O; called by `jobs::Integration`.

use serde_json::{Map, Value};

/// A checked hold path: one or more non-empty segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct HoldPath(Vec<String>);

impl HoldPath {
    /// Splits `path` on dots; `None` if a segment is empty.
    pub(super) fn parse(path: &str) -> Option<HoldPath> {
        let segments: Vec<String> = path.split('.').map(str::to_string).collect();
        if segments.iter().any(String::is_empty) {
            return None;
        }
        Some(HoldPath(segments))
    }

    /// The value at the path, if every step exists.
    pub(super) fn get<'a>(&self, object: &'a Value) -> Option<&'a Value> {
        self.0
            .iter()
            .try_fold(object, |value, segment| value.as_object()?.get(segment))
    }

    /// Writes `value` at the path, creating missing (or `null`) parents;
    /// `Value::Null` removes the field instead. Errors name the first
    /// segment that is not an object.
    pub(super) fn set(&self, object: &mut Value, value: Value) -> Result<(), String> {
        let Some((last, parents)) = self.0.split_last() else {
            return Ok(());
        };
        if value.is_null() {
            let parent = parents.iter().try_fold(object, |current, segment| {
                current.as_object_mut()?.get_mut(segment)
            });
            if let Some(map) = parent.and_then(Value::as_object_mut) {
                map.remove(last);
            }
            return Ok(());
        }
        let mut current = object;
        let mut walked = String::new();
        for segment in parents {
            let map = as_object(current, &walked)?;
            current = map
                .entry(segment.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !walked.is_empty() {
                walked.push('.');
            }
            walked.push_str(segment);
        }
        as_object(current, &walked)?.insert(last.clone(), value);
        Ok(())
    }
}

fn as_object<'a>(value: &'a mut Value, walked: &str) -> Result<&'a mut Map<String, Value>, String> {
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => Ok(map),
        other => {
            let place = if walked.is_empty() {
                "the object"
            } else {
                walked
            };
            Err(format!(
                "`{place}` is {}, not an object, so the hold field cannot be written",
                super::describe(other)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_segments_are_refused() {
        assert!(HoldPath::parse("spec..suspend").is_none());
        assert!(HoldPath::parse("").is_none());
        assert!(HoldPath::parse("spec.suspend").is_some());
    }

    #[test]
    fn set_creates_parents_and_null_removes() {
        let path = HoldPath::parse("spec.runPolicy.suspend").unwrap();
        let mut job = json!({"spec": {}});
        path.set(&mut job, json!(true)).unwrap();
        assert_eq!(job, json!({"spec": {"runPolicy": {"suspend": true}}}));
        path.set(&mut job, Value::Null).unwrap();
        assert_eq!(job, json!({"spec": {"runPolicy": {}}}));
        let mut bare = json!({});
        path.set(&mut bare, Value::Null).unwrap();
        assert_eq!(bare, json!({}));
    }

    #[test]
    fn a_non_object_in_the_way_is_an_error() {
        let path = HoldPath::parse("spec.runPolicy.suspend").unwrap();
        let mut job = json!({"spec": {"runPolicy": "fast"}});
        let error = path.set(&mut job, json!(true)).unwrap_err();
        assert!(error.contains("`spec.runPolicy` is"), "{error}");
        assert_eq!(job, json!({"spec": {"runPolicy": "fast"}}));
    }
}
