//! The PromQL and exposition-format reading the monitoring tests need:
//! [`reads`] finds the metric names and label names one (valid) PromQL
//! expression reads, [`Exposition::parse`] the sample names, their labels
//! and the families' types on a `/metrics` page. A scanner, not a parser:
//! promtool judges whether an expression is valid; this only has to find
//! names in valid ones.

use std::collections::{BTreeMap, BTreeSet};

/// What one PromQL expression reads: each selector's metric name with the
/// function or aggregation right around it ("" for none), and the label
/// names its matchers and its `by`, `without`, `on`, `ignoring` and
/// `group_*` clauses name. Assumes valid PromQL (promtool checks that).
#[derive(Debug, Default, PartialEq)]
pub struct Reads {
    pub metrics: Vec<(String, String)>,
    pub labels: BTreeSet<String>,
}

const AGGREGATIONS: [&str; 14] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const CLAUSES: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: [&str; 8] = [
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The index past the string literal opening at `at`.
fn past_string(chars: &[char], at: usize) -> usize {
    let quote = chars[at];
    let mut i = at + 1;
    while i < chars.len() {
        if chars[i] == '\\' && quote != '`' {
            i += 2;
        } else if chars[i] == quote {
            return i + 1;
        } else {
            i += 1;
        }
    }
    i
}

/// Reads label names from `at` (just inside `{` or `(`) up to `close`;
/// returns the index past it. Quoted strings (values) are skipped.
fn label_names(chars: &[char], at: usize, close: char, labels: &mut BTreeSet<String>) -> usize {
    let mut i = at;
    let mut expect_name = true;
    while i < chars.len() && chars[i] != close {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = past_string(chars, i);
            expect_name = false;
        } else if c == ',' {
            expect_name = true;
            i += 1;
        } else if is_name_char(c) && expect_name {
            let start = i;
            while i < chars.len() && is_name_char(chars[i]) {
                i += 1;
            }
            labels.insert(chars[start..i].iter().collect());
            expect_name = false;
        } else {
            i += 1;
        }
    }
    i + 1
}

pub fn reads(expr: &str) -> Reads {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Reads::default();
    // One entry per open parenthesis: the function or aggregation it
    // calls ("" for grouping).
    let mut calls: Vec<String> = Vec::new();
    // An aggregation whose parenthesis comes after its `by`/`without` clause.
    let mut aggregation: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = past_string(&chars, i);
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '{' {
            i = label_names(&chars, i + 1, '}', &mut out.labels);
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '(' {
            calls.push(aggregation.take().unwrap_or_default());
            i += 1;
        } else if c == ')' {
            calls.pop();
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            // A number or a duration (5m, 1e-3's "1e", 0x1f).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && is_name_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let lower = word.to_ascii_lowercase();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let opens = chars.get(next) == Some(&'(');
            if CLAUSES.contains(&lower.as_str()) {
                if opens {
                    i = label_names(&chars, next + 1, ')', &mut out.labels);
                }
            } else if opens {
                calls.push(lower);
                i = next + 1;
            } else if AGGREGATIONS.contains(&lower.as_str()) {
                aggregation = Some(lower);
            } else if !KEYWORDS.contains(&lower.as_str()) {
                out.metrics
                    .push((word, calls.last().cloned().unwrap_or_default()));
            }
        } else {
            i += 1;
        }
    }
    out
}

/// What a `/metrics` page holds.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Each sample name, with the label names its samples carry.
    pub series: BTreeMap<String, BTreeSet<String>>,
    /// Each family as its `# TYPE` line names it, with its type.
    pub types: BTreeMap<String, String>,
}

impl Exposition {
    pub fn parse(page: &str) -> Exposition {
        let mut out = Exposition::default();
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut words = rest.split_whitespace();
                if let (Some(family), Some(kind)) = (words.next(), words.next()) {
                    out.types.insert(family.to_string(), kind.to_string());
                }
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            let labels = out.series.entry(line[..end].to_string()).or_default();
            if line[end..].starts_with('{') {
                let chars: Vec<char> = line[end + 1..].chars().collect();
                label_names(&chars, 0, '}', labels);
            }
        }
        out
    }

    /// The type of the family the sample `name` belongs to.
    pub fn type_of(&self, name: &str) -> Option<&str> {
        if let Some(kind) = self.types.get(name) {
            return Some(kind);
        }
        ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| name.strip_suffix(suffix))
            .find_map(|family| self.types.get(family))
            .map(String::as_str)
            .filter(|kind| *kind == "histogram")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_scanner_finds_metrics_and_labels_and_nothing_else() {
        let found = reads(
            r#"sum by (cluster_queue) (rate(a_total{x="1", y=~"b|c}"}[5m] offset 1h)) / on (x) group_left (z)
               (max without (w) (b) > bool 0) unless c or label_replace(d, "dst", "$1", "src", "(.*)")
               * histogram_quantile(0.99, sum by (le) (rate(e_bucket[$__rate_interval]))) + vector(1e-3) - Inf"#
                .replace("$__rate_interval", "2m")
                .as_str(),
        );
        let metrics: Vec<(&str, &str)> = found
            .metrics
            .iter()
            .map(|(m, f)| (m.as_str(), f.as_str()))
            .collect();
        assert_eq!(
            metrics,
            [
                ("a_total", "rate"),
                ("b", "max"),
                ("c", ""),
                ("d", "label_replace"),
                ("e_bucket", "rate")
            ]
        );
        let labels: Vec<&str> = found.labels.iter().map(String::as_str).collect();
        assert_eq!(labels, ["cluster_queue", "le", "w", "x", "y", "z"]);
        assert_eq!(
            reads("(sum(arbiter_leader) or vector(0)) == 0").metrics,
            [("arbiter_leader".to_string(), "sum".to_string())]
        );
    }

    #[test]
    fn the_exposition_parser_reads_names_labels_and_types() {
        let page = "# HELP x_seconds Time.\n# TYPE x_seconds histogram\n\
                    x_seconds_bucket{q=\"a,b=\\\"c\\\"\",le=\"+Inf\"} 1\nx_seconds_sum{q=\"a\"} 2\n\
                    # TYPE y_total counter\ny_total 3\n";
        let e = Exposition::parse(page);
        let names: Vec<&str> = e.series.keys().map(String::as_str).collect();
        assert_eq!(names, ["x_seconds_bucket", "x_seconds_sum", "y_total"]);
        let labels: Vec<&str> = e.series["x_seconds_bucket"]
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(labels, ["le", "q"]);
        assert_eq!(e.type_of("x_seconds_sum"), Some("histogram"));
        assert_eq!(e.type_of("y_total"), Some("counter"));
        assert_eq!(e.type_of("y_total_sum"), None);
    }
}
