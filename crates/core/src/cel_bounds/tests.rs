use std::sync::Arc;

use cel::{Context, Env, Value};

use super::*;

fn env() -> Arc<Env> {
    let mut env = Env::stdlib();
    register(&mut env).unwrap();
    Arc::new(env)
}

fn no_variables(_: &str) -> Option<ValueBound> {
    None
}

/// The result of `source` as written and as instrumented (metered with
/// `budget`), rendered for comparison, and the overrun if any.
fn both(source: &str, budget: u64) -> (String, String, Option<Overrun>) {
    let env = env();
    let limits = CelLimits::default();
    let plain = parse(&env, source, &limits).unwrap();
    let mut metered_tree = plain.clone();
    instrument(&mut metered_tree, &no_variables);
    let context = Context::with_env(Arc::clone(&env));
    let render = |r: Result<cel::common::value::CowVal<'_, '_>, cel::ExecutionError>| match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("err {e}"),
    };
    let plain_result = render(Value::resolve_val(&plain, &context));
    let (metered_result, overrun) = metered(budget, || {
        render(Value::resolve_val(&metered_tree, &context))
    });
    (plain_result, metered_result, overrun)
}

#[test]
fn instrumenting_changes_no_result_and_no_error() {
    let expressions = [
        "[1, 2, 3].map(x, x * 2)",
        "[1, 2, 3].filter(x, x > 1)",
        "[1, 2, 3].map(x, x > 1, x + 10)",
        "[1, 2, 3].all(x, x > 0)",
        "[1, 2, 3].exists(x, x == 2)",
        "[1, 2, 3].exists_one(x, x == 2)",
        // deferred errors of `&&`/`||` folds: `error || true` is true
        "[0, 1].exists(x, 1 / x > 0)",
        "[0, 1].all(x, 1 / x > 0)",
        "[1, 0].all(x, 1 / x > 5)",
        "'a' + 'b' + 'c'",
        "[1] + [2] + [3]",
        "{'a': 1}.all(k, k == 'a')",
        "[[1, 2], [3]].map(l, l.map(x, x + 1))",
        "[1, 2].map(x, [3, 4].filter(y, y > x))",
        "1 + 2 + 3",
        "size([1, 2].map(x, 'x' + string(x)))",
    ];
    for e in expressions {
        let (plain, metered, overrun) = both(e, DEFAULT_BUDGET);
        assert_eq!(plain, metered, "{e}");
        assert_eq!(overrun, None, "{e}");
    }
}

#[test]
fn the_meter_stops_an_evaluation_at_its_budget_and_the_overrun_decides() {
    let e = "[1, 2, 3, 4, 5, 6, 7, 8].map(x, [1, 2, 3, 4, 5, 6, 7, 8].map(y, x * y))";
    let (plain, within, overrun) = both(e, 1_000);
    assert_eq!(plain, within);
    assert_eq!(overrun, None);
    let (_, _, overrun) = both(e, 50);
    assert_eq!(overrun, Some(Overrun::Budget { budget: 50 }));
    // an `||` fold that would absorb the error still reports the overrun
    let absorbing = "[1, 2, 3, 4].exists(x, [1, 2, 3, 4, 5, 6].all(y, y > 0) || true)";
    let (plain, metered, overrun) = both(absorbing, 10);
    assert!(plain.starts_with("ok") && plain.contains("true"), "{plain}");
    assert_eq!(overrun, Some(Overrun::Budget { budget: 10 }), "{metered}");
}

#[test]
fn strings_and_lists_built_are_capped() {
    let doubling = format!("['{}'].map(s, s + s + s + s + s)", "x".repeat(16_000));
    let (_, metered, overrun) = both(&doubling, u64::MAX);
    assert!(metered.starts_with("err"), "{metered}");
    assert_eq!(overrun, Some(Overrun::String { bytes: 80_000 }));
    let (_, _, overrun) = both("[1, 2].map(x, [1] + [2])", u64::MAX);
    assert_eq!(overrun, None);
}

#[test]
fn the_estimate_multiplies_nested_comprehensions_by_their_ranges() {
    let env = env();
    let limits = CelLimits::default();
    let cost = |source: &str, params: &serde_json::Value| {
        let tree = parse(&env, source, &limits).unwrap();
        let shape = ValueBound::of_json(params);
        estimate(
            &tree,
            &|name| (name == "params").then(|| shape.clone()),
            100,
        )
    };
    let none = serde_json::json!({});
    let one = cost("[1, 2, 3].all(x, x > 0)", &none);
    let nested = cost("[1, 2, 3].all(x, [1, 2, 3].all(y, x > y))", &none);
    assert!(one < nested && nested > 9 * 3, "{one} {nested}");
    let big = serde_json::json!({ "xs": (0..100_000).collect::<Vec<_>>() });
    let huge = cost("params.xs.all(x, params.xs.all(y, x != y))", &big);
    assert!(huge >= 100_000 * 100_000, "{huge}");
    // an unknown collection is assumed to hold `unknown_len` entries
    let unknown = cost("object.items.all(x, x > 0)", &none);
    assert!(unknown >= 100, "{unknown}");
    // concatenation costs what it can build: 2,000 bytes at 16 a unit
    let concat = cost(
        &format!("[1, 2, 3, 4].map(x, '{}' + '{0}')", "y".repeat(1000)),
        &none,
    );
    assert!(concat >= 4 * 2000 / STRING_BYTES_PER_UNIT, "{concat}");
    let lists = cost("[1, 2, 3, 4].map(x, [1, 2, 3] + [4, 5, 6])", &none);
    assert!(lists >= 4 * 6, "{lists}");
}

#[test]
fn bound_refuses_what_is_over_the_limit_and_names_both_numbers() {
    let env = env();
    let limits = CelLimits {
        max_cost: 1_000,
        ..CelLimits::default()
    };
    let mut tree = parse(
        &env,
        "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].exists(z, x + y == z)))",
        &CelLimits {
            max_comprehension_nesting: 3,
            ..CelLimits::default()
        },
    )
    .unwrap();
    let err = bound(&mut tree, &limits, &no_variables, 100).unwrap_err();
    let LimitError::TooCostly(TooCostly { estimated, max }) = &err else {
        panic!("{err}");
    };
    assert!(*estimated > 1_000 && *max == 1_000);
    assert!(err.to_string().contains("over the budget of 1000"), "{err}");
}

#[test]
fn a_line_longer_than_the_parser_can_count_is_refused_before_parsing() {
    // cel 0.15's parser panics on a syntax error past column 65,535
    let env = env();
    let source = format!("{} +", "1 + ".repeat(20_000));
    let limits = CelLimits {
        max_expression_bytes: usize::MAX,
        ..CelLimits::default()
    };
    let err = parse(&env, &source, &limits).unwrap_err();
    assert!(
        matches!(err, LimitError::TooLong { max: 65_535, .. }),
        "{err}"
    );
}

#[test]
fn the_caps_on_what_is_built_hold_at_their_exact_sizes() {
    // A string of exactly MAX_BUILT_STRING bytes is built; one byte more is not.
    // (An eighth of it, eight times: the expression stays under the parser's 16 KiB.)
    let eighth = "x".repeat(MAX_BUILT_STRING / 8);
    let eight = "s + s + s + s + s + s + s + s";
    let at_cap = format!("['{eighth}'].map(s, {eight})");
    let (_, metered, overrun) = both(&at_cap, u64::MAX);
    assert_eq!(overrun, None, "{}", &metered[..metered.len().min(200)]);
    let over = format!("['{eighth}'].map(s, {eight} + 'x')");
    let (_, _, overrun) = both(&over, u64::MAX);
    assert_eq!(
        overrun,
        Some(Overrun::String {
            bytes: MAX_BUILT_STRING + 1
        })
    );
    // A list of exactly MAX_BUILT_LIST entries is built; one more is not.
    // (A hundred entries, ten times, ten times: list literals hold at most
    // 256 and expressions nest at most 32 deep.)
    let entries = ["1"; MAX_BUILT_LIST / 100].join(", ");
    let ten = |v: &str| [v; 10].join(" + ");
    let at_cap = format!("[[{entries}]].map(l, {}).map(m, {})", ten("l"), ten("m"));
    let (_, _, overrun) = both(&at_cap, u64::MAX);
    assert_eq!(overrun, None);
    let over = format!(
        "[[{entries}]].map(l, {}).map(m, {} + [1])",
        ten("l"),
        ten("m")
    );
    let (_, metered, overrun) = both(&over, u64::MAX);
    assert!(
        metered.starts_with("err"),
        "{}",
        &metered[..metered.len().min(200)]
    );
    assert_eq!(
        overrun,
        Some(Overrun::List {
            entries: MAX_BUILT_LIST + 1
        })
    );
}
