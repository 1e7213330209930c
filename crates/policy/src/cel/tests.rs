//! CEL as policies meet it: each result type on realistic views, folded
//! params and flattened fields giving the same results and errors, limits
//! and unknown names refused at load, and nasty expressions never
//! panicking.

use std::collections::BTreeMap;

use super::*;
use crate::view::{
    ClusterQueueView, DeviceView, EstimateView, FlavorView, NodeView, PodSetView, PodView,
    QueueView, TypicalPodView, WorkloadView,
};

fn workload() -> WorkloadView {
    WorkloadView {
        name: "train-llm".into(),
        namespace: "research".into(),
        kind: "Job".into(),
        labels: BTreeMap::from([
            ("team".into(), "nlp".into()),
            ("urgent".into(), "true".into()),
        ]),
        priority: 100,
        priority_weight: 2.0,
        queue_name: "research".into(),
        cluster_queue: "gpu".into(),
        pod_sets: vec![PodSetView {
            name: "workers".into(),
            count: 4,
            min_count: None,
            requests: BTreeMap::from([("cpu".into(), 8.0), ("nvidia.com/gpu".into(), 2.0)]),
            eligible_flavors: Vec::new(),
        }],
        requests: BTreeMap::from([("cpu".into(), 32.0), ("nvidia.com/gpu".into(), 8.0)]),
        gpus: 8,
        age_seconds: 600.0,
        ..WorkloadView::default()
    }
}

fn queue() -> QueueView {
    QueueView {
        name: "research".into(),
        namespace: "research".into(),
        priority: Some(3),
        cluster_queue: "gpu".into(),
    }
}

fn program(expression: &str) -> CelProgram {
    compile(expression, &CelLimits::default())
        .unwrap_or_else(|e| panic!("`{expression}` should compile: {e}"))
}

fn vars<'a>(w: &'a WorkloadView, q: &'a QueueView, params: &'a Params) -> Vars<'a> {
    Vars {
        workload: Some(w),
        queue: Some(q),
        now: 1000.0,
        params: Some(params),
        ..Vars::default()
    }
}

#[test]
fn folded_params_give_the_same_results_and_errors() {
    let (w, q) = (workload(), queue());
    let config = serde_json::json!({
        "int": 3, "big": u64::MAX, "double": 2.5, "text": "urgent", "yes": true,
        "none": null, "teams": ["nlp"], "nested": {"k": 1}
    });
    let params = Params::new(&config);
    let v = vars(&w, &q, &params);
    let numbers = [
        "double(params.int) * params.double",
        "params.double * 2.0 + double(params.big) * 0.0",
        "params.yes ? params.double : 0.0",
        "params.int * 1.5",     // int * double: no such overload
        "params.missing * 1.0", // no such key
        "params.none == null ? 1.0 : 0.0",
        "double(params.nested.k)",
        "[1.0, 2.0].map(params, params * 2.0)[1]", // shadowed: not folded
    ];
    let booleans = [
        "params.text in workload.labels",
        "has(params.text) && !has(params.missing)",
        "workload.labels['team'] in params.teams",
        "[1, 2].exists(params, params > 1)",
    ];
    let strings = ["params.text + '!'", "string(params.int) + params.text"];
    let both = |e: &str| {
        let folded = compile_with(e, &CelLimits::default(), &config).unwrap();
        (program(e), folded)
    };
    for e in numbers {
        let (plain, folded) = both(e);
        assert_eq!(
            format!("{:?}", plain.eval_number(&v)),
            format!("{:?}", folded.eval_number(&v)),
            "{e}"
        );
    }
    for e in booleans {
        let (plain, folded) = both(e);
        assert_eq!(
            format!("{:?}", plain.eval_bool(&v)),
            format!("{:?}", folded.eval_bool(&v)),
            "{e}"
        );
    }
    for e in strings {
        let (plain, folded) = both(e);
        assert_eq!(
            format!("{:?}", plain.eval_string(&v)),
            format!("{:?}", folded.eval_string(&v)),
            "{e}"
        );
    }
    // Folding happened: the folded program runs without any `params`.
    let folded = compile_with("params.double * 2.0", &CelLimits::default(), &config).unwrap();
    let no_params = Vars {
        params: None,
        ..vars(&w, &q, &params)
    };
    assert_eq!(folded.eval_number(&no_params).unwrap(), 5.0);
    assert!(program("params.double * 2.0")
        .eval_number(&no_params)
        .is_err());
}

#[test]
fn reads_field_over_estimates_never_under() {
    let reads = |e: &str| program(e).reads_field("clusterQueue", "nominal");
    assert!(!reads("clusterQueue.decayedUsage > 0.0"));
    assert!(!reads("clusterQueue.usage.size() > 0"));
    assert!(!reads("workload.namespace == 'nominal'"));
    for e in [
        "clusterQueue.nominal.size() > 0",
        "clusterQueue.nominal['a100']['nvidia.com/gpu'] > 1.0",
        // The view itself, not one field of it: anything may be read.
        "has(clusterQueue.nominal)",
        "clusterQueue['nominal'].size() > 0",
        "[clusterQueue].exists(c, c.weight > 0.0)",
        "[1].exists(clusterQueue, clusterQueue > 0)",
    ] {
        assert!(reads(e), "{e}");
    }
}

#[test]
fn known_view_fields_are_flattened_into_identifiers() {
    let flattened = |e: &str| format!("{:?}", program(e).expression);
    let debug = flattened("workload.gpus > 1 && queue.name == 'q'");
    assert!(debug.contains(r#"Ident("workload.gpus")"#), "{debug}");
    assert!(debug.contains(r#"Ident("queue.name")"#), "{debug}");
    // Unknown fields, has() and shadowed views keep their selects.
    for e in [
        "workload.gpuz > 1",
        "has(workload.labels)",
        "[1].exists(workload, workload.gpus > 0)",
    ] {
        assert!(!flattened(e).contains("Ident(\"workload."), "{e}");
    }
    let (w, q) = (workload(), queue());
    let params = Params::new(&serde_json::Value::Null);
    let error = program("workload.gpuz > 1")
        .eval_bool(&vars(&w, &q, &params))
        .unwrap_err()
        .to_string();
    assert!(error.contains("gpuz"), "{error}");
}

#[test]
fn programs_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CelProgram>();
    assert_send_sync::<Params>();
}

#[test]
fn evaluates_each_result_type_on_realistic_views() {
    let (w, q) = (workload(), queue());
    let params = Params::new(
        &serde_json::json!({"boostLabel": "urgent", "boost": 2.5, "teams": ["nlp", "vision"]}),
    );
    let v = vars(&w, &q, &params);
    let number = |e: &str| program(e).eval_number(&v).unwrap();
    let boolean = |e: &str| program(e).eval_bool(&v).unwrap();
    assert_eq!(
        number("double(workload.priority) * workload.priorityWeight * 10.0 + workload.ageSeconds / 60.0 + double(queue.priority) * 5.0"),
        100.0 * 2.0 * 10.0 + 10.0 + 15.0
    );
    assert_eq!(number("workload.gpus * 2"), 16.0);
    assert_eq!(
        number("workload.podSets[0].requests['cpu'] * double(workload.podSets[0].count)"),
        32.0
    );
    assert_eq!(number("workload.requests['nvidia.com/gpu']"), 8.0);
    assert_eq!(number("now - workload.ageSeconds"), 400.0);
    assert_eq!(
        number("params.boostLabel in workload.labels ? params.boost : 1.0"),
        2.5
    );
    assert_eq!(number("quantity('500m') + quantity('1Ki')"), 1024.5);
    assert!(boolean("workload.gpus <= 8"));
    assert!(boolean("workload.gpus <= 8.0 && workload.ageSeconds > 60"));
    assert!(boolean("workload.labels['team'] in params.teams"));
    assert!(boolean(
        "workload.podSets.all(p, p.count > 0 && p.requests.exists(r, r == 'cpu'))"
    ));
    assert!(boolean(
        "size(workload.podSets) == 1 && size(workload.labels) == 2"
    ));
    assert!(boolean("workload.labels.?owner.orValue('none') == 'none'"));
    assert_eq!(
        program("'development jobs may ask for at most 8 GPUs, got ' + string(workload.gpus)")
            .eval_string(&v)
            .unwrap(),
        "development jobs may ask for at most 8 GPUs, got 8"
    );
    assert_eq!(
        program("workload.podSets.map(p, p.name) + [workload.clusterQueue, queue.name]")
            .eval_string_list(&v)
            .unwrap(),
        ["workers", "gpu", "research"]
    );
    let flavor = FlavorView {
        name: "a100".into(),
        nodes: 4,
        min_nodes: 1,
        max_nodes: 10,
        utilization: 0.9,
        pending_nodes: 1.5,
        target_utilization: 75.0,
    };
    let cq = ClusterQueueView {
        name: "gpu".into(),
        decayed_usage: 3600.0,
        nominal: BTreeMap::from([(
            "a100".into(),
            BTreeMap::from([("nvidia.com/gpu".into(), 16.0)]),
        )]),
        ..ClusterQueueView::default()
    };
    let v = Vars {
        flavor: Some(&flavor),
        cluster_queue: Some(&cq),
        ..Vars::default()
    };
    assert_eq!(
        program("double(flavor.nodes) * flavor.utilization * 100.0 / flavor.targetUtilization + flavor.pendingNodes").eval_number(&v).unwrap(),
        4.0 * 0.9 * 100.0 / 75.0 + 1.5
    );
    assert_eq!(
        program("clusterQueue.nominal['a100']['nvidia.com/gpu'] / clusterQueue.decayedUsage")
            .eval_number(&v)
            .unwrap(),
        16.0 / 3600.0
    );
}

#[test]
fn optional_fields_are_null_when_unset_and_has_tells_whether_they_are_set() {
    let (mut w, q) = (workload(), queue());
    let params = Params::new(&serde_json::json!({"a": null}));
    let v = vars(&w, &q, &params);
    let boolean = |e: &str, v: &Vars| program(e).eval_bool(v).unwrap();
    assert!(boolean("workload.estimate == null", &v));
    assert!(!boolean("has(workload.estimate)", &v));
    assert!(!boolean("has(workload.priorityClass)", &v));
    assert!(boolean("workload.priorityClass == null", &v));
    assert!(!boolean("has(workload.podSets[0].minCount)", &v));
    assert!(boolean("has(queue.priority)", &v));
    assert!(boolean("has(workload.gpus)", &v));
    assert!(!boolean("has(workload.nonsense)", &v));
    // CEL's own has() on maps: a key holding null is present
    assert!(boolean("has(params.a)", &v));
    assert!(!boolean("has(params.b)", &v));
    assert_eq!(
        program("has(workload.estimate) ? workload.estimate.runtimeSeconds : 0.0")
            .eval_number(&v)
            .unwrap(),
        0.0
    );
    w.estimate = Some(EstimateView {
        runtime_seconds: 3600.0,
        samples: 12,
    });
    w.priority_class = Some("high".into());
    let v = vars(&w, &q, &params);
    assert!(boolean(
        "workload.estimate != null && has(workload.estimate)",
        &v
    ));
    assert!(boolean(
        "has(workload.priorityClass) && workload.priorityClass == 'high'",
        &v
    ));
    assert_eq!(
        program("workload.estimate != null ? workload.estimate.runtimeSeconds : 0.0")
            .eval_number(&v)
            .unwrap(),
        3600.0
    );
    assert_eq!(
        program("workload.estimate.samples")
            .eval_number(&v)
            .unwrap(),
        12.0
    );
}

#[test]
fn a_syntax_error_has_its_1_based_line_and_column() {
    let error = compile(
        "workload.gpus <= 8 &&\n  workload.name ==* 'x'",
        &CelLimits::default(),
    )
    .unwrap_err();
    let CelError::Syntax {
        line,
        column,
        message,
    } = error
    else {
        panic!("{error:?}")
    };
    assert_eq!((line, column), (2, 19), "{message}");
    let error = compile("1 +", &CelLimits::default()).unwrap_err();
    assert!(
        matches!(
            error,
            CelError::Syntax {
                line: 1,
                column: 4,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn limits_and_unknown_variables_are_refused_at_load() {
    let limits = CelLimits::default();
    assert_eq!(
        compile(&"1".repeat(20_000), &limits).unwrap_err(),
        CelError::TooLong {
            bytes: 20_000,
            max: 16 * 1024
        }
    );
    assert!(matches!(
        compile(&vec!["1"; 40].join(" + "), &limits),
        Err(CelError::TooDeep { max: 32, .. })
    ));
    assert!(compile(&vec!["1"; 30].join(" + "), &limits).is_ok());
    assert!(matches!(
        compile(&format!("{}1{}", "(".repeat(200), ")".repeat(200)), &limits),
        Err(CelError::TooDeep { .. })
    ));
    assert!(matches!(
        compile("[1].all(a, [1].all(b, [1].all(c, true)))", &limits),
        Err(CelError::TooManyComprehensions { depth: 3, max: 2 })
    ));
    let big_list = format!("[{}]", vec!["1"; 300].join(","));
    assert_eq!(
        compile(&big_list, &limits).unwrap_err(),
        CelError::LiteralTooLarge {
            elements: 300,
            max: 256
        }
    );
    assert_eq!(
        compile("wrkload.gpus > 1", &limits).unwrap_err(),
        CelError::UnknownVariable {
            name: "wrkload".into()
        }
    );
    assert!(compile(
        "workload.podSets.exists(p, p.count > 1) && [1, 2].map(x, x * 2)[0] == 2",
        &limits
    )
    .is_ok());
    assert!(compile(
        "type(workload.gpus) == int && optional.of(1).hasValue()",
        &limits
    )
    .is_ok());
    assert!(
        matches!(compile("workload.podSets.all(p, q.count > 1)", &limits), Err(CelError::UnknownVariable { name }) if name == "q")
    );
}

#[test]
fn wrong_result_types_and_runtime_errors_say_what_went_wrong() {
    let (w, q) = (workload(), queue());
    let params = Params::new(&serde_json::json!({}));
    let v = vars(&w, &q, &params);
    assert_eq!(
        program("workload.gpus").eval_bool(&v).unwrap_err(),
        EvalError::WrongType {
            expected: "a bool",
            got: "int".into()
        }
    );
    assert_eq!(
        program("workload.name").eval_number(&v).unwrap_err(),
        EvalError::WrongType {
            expected: "a number",
            got: "string".into()
        }
    );
    assert!(matches!(
        program("[1, 'a']").eval_string_list(&v),
        Err(EvalError::WrongType { .. })
    ));
    assert!(
        matches!(program("workload").eval_string(&v), Err(EvalError::WrongType { got, .. }) if got == "arbiter.Workload")
    );
    assert_eq!(
        program("1.0 / 0.0").eval_number(&v).unwrap_err(),
        EvalError::NotFinite
    );
    let runtime = |e: &str, v: &Vars| match program(e).eval_number(v) {
        Err(EvalError::Runtime(message)) => message,
        other => panic!("`{e}`: {other:?}"),
    };
    assert!(runtime("workload.labels['owner'] == 'x' ? 1 : 0", &v).contains("owner"));
    assert!(runtime("params.missing", &v).contains("missing"));
    assert!(runtime("workload.nonsense", &v).contains("nonsense"));
    assert!(runtime("double(flavor.nodes)", &v).contains("`flavor` is not available"));
    assert!(runtime("1 / 0", &v).contains("Division by zero"));
    let mixed = runtime("workload.priority * 1.5", &v);
    assert!(
        mixed.contains("Int(100)") && mixed.contains("Float(1.5)"),
        "{mixed}"
    );
    assert!(runtime("quantity('lots')", &v).contains("lots"));
    let no_params = Vars { params: None, ..v };
    assert!(runtime("params.boost", &no_params).contains("`params`"));
}

#[test]
fn check_input_sizes_refuses_oversized_workloads() {
    let mut w = workload();
    assert_eq!(check_input_sizes(&w), Ok(()));
    w.pod_sets = vec![PodSetView::default(); MAX_POD_SETS + 1];
    assert!(matches!(check_input_sizes(&w), Err(EvalError::Runtime(m)) if m.contains("pod sets")));
    let mut w = workload();
    w.labels = (0..=MAX_LABELS)
        .map(|i| (i.to_string(), String::new()))
        .collect();
    assert!(check_input_sizes(&w).is_err());
}

/// Whatever the expression, compiling and evaluating it returns; this
/// test fails by panicking or overflowing the stack.
#[test]
fn nasty_expressions_never_panic() {
    let (mut w, q) = (workload(), queue());
    w.labels = (0..MAX_LABELS)
        .map(|i| (i.to_string(), "x".repeat(100)))
        .collect();
    let params = Params::new(&serde_json::json!({"nested": {"deeper": [1, 2, null]}}));
    let long_concat = vec!["'abcdefghij'"; 1000].join(" + ");
    let many = vec!["1"; 4000].join("+");
    let nasty: Vec<String> = [
        "1/0",
        "1 % 0",
        "1.0/0.0",
        "0.0/0.0",
        "-9223372036854775807 - 2",
        "9223372036854775807 * 2",
        "'a' * 3",
        "workload.name * 2",
        "workload.labels['nope']",
        "workload.estimate.runtimeSeconds",
        "workload.priorityClass.size()",
        "null.x",
        "params.missing",
        "params.nested.deeper[5]",
        "params.nested.deeper[-1]",
        "params.nested.deeper[2].x",
        "workload.podSets[99]",
        "workload.podSets['a']",
        "workload[1]",
        "workload['gpus']",
        "has(workload.estimate.samples)",
        "has(params.nested.x.y)",
        "workload.labels.map(k, workload.labels.map(j, k + j))",
        "size(workload)",
        "workload == workload",
        "workload < queue",
        "workload + 1",
        "-workload",
        "!workload",
        "workload ? 1 : 2",
        "workload in workload",
        "[workload, queue][0].gpus",
        "{workload: 1}",
        "{'a': 1, 'a': 2}",
        "type(workload)",
        "string(workload)",
        "double(workload.labels)",
        "int(1e300)",
        "uint(-1)",
        "quantity(1)",
        "quantity('9999999999999999Ei')",
        "optional.none().value()",
        "workload.?estimate.orValue(1)",
        "dyn(workload).gpus",
        "now.x",
        "cohort.name",
        "[1,2,3].all(x, x / 0 == 1)",
        "[].exists(x, x)",
        "'\\u0000'",
        "b'\\xff' + b'\\x00'",
        "1 +",
        ")",
        "",
        "((((((((((",
        "]]]]",
        "'unterminated",
        "\"\"\"",
        ".workload.gpus",
        "workload..gpus",
        "workload.podSets.exists_one(p, p.count == 4)",
        "workload.podSets.filter(p, p.count > 1).map(p, p.name)",
        "__result__",
        "@result",
        "workload.gpus.gpus",
        "1 in workload.gpus",
        "google.protobuf.Duration{seconds: 1}",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        long_concat,
        many,
        format!("{}1{}", "(".repeat(128), ")".repeat(128)),
        format!("{}1{}", "[".repeat(5000), "]".repeat(5000)),
        format!("{}true", "!".repeat(5000)),
        format!("{}1", "-".repeat(5000)),
        format!("workload{}", ".a".repeat(5000)),
        format!("[{}]", vec!["1"; 4000].join(",")),
        format!("{}1{}", "true ? ".repeat(1000), " : 0".repeat(1000)),
        vec!["true"; 4000].join(" && "),
        vec!["1 in [1]"; 500].join(" == "),
        "'x' + ".repeat(2000) + "'x'",
    ])
    .collect();
    let lenient = CelLimits {
        max_expression_bytes: 1 << 20,
        max_nesting: 64,
        max_comprehension_nesting: 3,
        max_literal_elements: 5000,
        max_cost: u64::MAX,
    };
    for expression in &nasty {
        for limits in [CelLimits::default(), lenient.clone()] {
            if let Ok(p) = compile(expression, &limits) {
                let v = vars(&w, &q, &params);
                let _ = p.eval_bool(&v);
                let _ = p.eval_number(&v);
                let _ = p.eval_string(&v);
                let _ = p.eval_string_list(&v);
                let _ = p.eval_number(&Vars::default());
            }
        }
    }
}

/// A tenant policy's limits: the default 20 ms at `UNITS_PER_MS`.
fn tenant_limits() -> CelLimits {
    CelLimits {
        max_cost: 20 * arbiter_core::cel_bounds::UNITS_PER_MS,
        ..CelLimits::default()
    }
}

#[test]
fn nested_string_building_inside_every_size_limit_is_refused_at_load() {
    // 16 KiB, two comprehensions, 256-element literals: it once took 3 s
    // and 1 GB per evaluation
    let list = format!("[{}]", vec!["1"; 250].join(", "));
    let text = "x".repeat(2_000);
    let expression =
        format!("size({list}.map(a, {list}.map(b, '{text}' + '{text}' + '{text}'))) > 0");
    assert!(expression.len() < 16 * 1024);
    let err = compile(&expression, &tenant_limits()).unwrap_err();
    assert!(
        matches!(&err, CelError::TooCostly(c) if c.max == 200_000 && c.estimated > 200_000),
        "{err}"
    );
    assert!(
        err.to_string().contains("over the budget of 200000"),
        "{err}"
    );
}

#[test]
fn a_params_list_iterated_in_nested_comprehensions_is_refused_at_load() {
    let config =
        serde_json::json!({ "teams": (0..100_000).map(|i| format!("t{i}")).collect::<Vec<_>>() });
    let expression = "params.teams.all(a, params.teams.all(b, a == b || a != b))";
    let err = compile_with(expression, &CelLimits::default(), &config).unwrap_err();
    assert!(matches!(err, CelError::TooCostly(_)), "{err}");
    // one level over the same list is within the platform default
    let one = compile_with(
        "params.teams.exists(t, t == 'x')",
        &CelLimits::default(),
        &config,
    );
    assert!(one.is_ok(), "{one:?}");
}

#[test]
fn the_run_time_budget_stops_what_the_estimate_could_not_foresee() {
    // annotation values are assumed at most 1 KiB long; this one is 60 KiB
    let mut w = workload();
    w.annotations = BTreeMap::from([("blob".into(), "y".repeat(60 * 1024))]);
    let q = queue();
    let params = Params::new(&serde_json::json!({}));
    let v = vars(&w, &q, &params);
    let list = format!("[{}]", vec!["1"; 200].join(", "));
    let expression = format!("size({list}.map(i, workload.annotations['blob'] + 'z')) > 0");
    let p = compile(&expression, &tenant_limits()).unwrap();
    assert!(p.estimated_cost() <= 200_000, "{}", p.estimated_cost());
    let err = p.eval_bool(&v).unwrap_err();
    assert!(
        matches!(&err, EvalError::Budget(m) if m.contains("budget of 200000")),
        "{err}"
    );
    assert_eq!(crate::eval::PolicyError::from(err).kind, "cel_budget");
    // a string over the cap is stopped whatever the budget
    let doubling = "size(workload.annotations['blob'] + workload.annotations['blob']) > 0";
    let err = program(doubling).eval_bool(&v).unwrap_err();
    assert!(
        matches!(&err, EvalError::Budget(m) if m.contains("string of 122880 bytes")),
        "{err}"
    );
    // the same expressions on a small workload evaluate as before
    let small = workload();
    let v = vars(&small, &q, &params);
    assert!(
        program("size(workload.labels.map(k, k + workload.labels[k])) == 2")
            .eval_bool(&v)
            .unwrap()
    );
}

fn gpu_node() -> NodeView {
    NodeView {
        index: 3,
        name: "gpu-3".into(),
        flavor: "gpu".into(),
        free: BTreeMap::from([
            ("cpu".into(), 60.0),
            ("example.com/gpu-milli".into(), 1500.0),
        ]),
        allocatable: BTreeMap::from([
            ("cpu".into(), 64.0),
            ("example.com/gpu-milli".into(), 2000.0),
        ]),
        devices: vec![DeviceView {
            resource: "example.com/gpu-milli".into(),
            per_card: 1000.0,
            cards: vec![500.0, 1000.0],
        }],
        labels: BTreeMap::from([("topology-rack".into(), "r2".into())]),
    }
}

#[test]
fn placement_sees_the_node_the_pod_and_the_typical_pods() {
    let w = workload();
    let node = gpu_node();
    let pod = PodView {
        requests: BTreeMap::from([("cpu".into(), 4.0), ("example.com/gpu-milli".into(), 500.0)]),
    };
    let typical = [
        TypicalPodView {
            requests: BTreeMap::from([("example.com/gpu-milli".into(), 500.0)]),
            flavors: Vec::new(),
            share: 0.75,
        },
        TypicalPodView {
            requests: BTreeMap::from([("example.com/gpu-milli".into(), 1000.0)]),
            flavors: Vec::new(),
            share: 0.25,
        },
    ];
    let v = Vars {
        workload: Some(&w),
        node: Some(&node),
        pod: Some(&pod),
        typical: Some(&typical),
        ..Vars::default()
    };
    let number = |e: &str| {
        program(e)
            .eval_number(&v)
            .unwrap_or_else(|err| panic!("{e}: {err}"))
    };
    assert_eq!(number("node.index"), 3.0);
    assert_eq!(number("node.free['cpu'] - pod.requests['cpu']"), 56.0);
    assert_eq!(number("node.allocatable['example.com/gpu-milli']"), 2000.0);
    assert_eq!(
        number("node.labels['topology-rack'] == 'r2' ? 1.0 : 0.0"),
        1.0
    );
    assert_eq!(number("node.devices[0].perCard"), 1000.0);
    assert_eq!(number("node.devices[0].cards[0]"), 500.0);
    assert_eq!(number("double(size(node.devices[0].cards.filter(c, c >= pod.requests['example.com/gpu-milli'])))"), 2.0);
    // FGD-like: how many typical shapes one of the node's cards still holds.
    assert_eq!(
        number("double(typical.filter(t, node.devices[0].cards.exists(c, c >= t.requests['example.com/gpu-milli'])).size())"),
        2.0
    );
    assert!(program("node.name == 'gpu-3' && workload.gpus == 8")
        .eval_bool(&v)
        .unwrap());
    // The placement variables are not there for other hooks.
    let err = program("node.index")
        .eval_number(&Vars {
            workload: Some(&w),
            ..Vars::default()
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("variable `node` is not available"),
        "{err}"
    );
    let err = compile("nodes.size()", &CelLimits::default()).unwrap_err();
    assert!(err.to_string().contains("node, pod, typical"), "{err}");
}

#[test]
fn placement_expressions_are_bounded_by_the_caps_of_their_variables() {
    // A comprehension over the typical pods with one over a node's cards
    // inside is estimated from the caps (64 typical pods × 256 cards) and
    // fits the platform's default budget.
    let p = program("typical.map(t, node.devices[0].cards.filter(c, c >= t.share).size())");
    assert!(
        p.estimated_cost() >= (MAX_TYPICAL * 256) as u64,
        "{}",
        p.estimated_cost()
    );
    // …and the input is checked against the caps the estimate assumed:
    // of more typical pods, the expression is given the most frequent 64
    // (they come most frequent first).
    let mut input = crate::view::PlacementInput {
        nodes: vec![gpu_node()],
        typical: (0..MAX_TYPICAL + 1)
            .map(|i| TypicalPodView {
                share: (MAX_TYPICAL + 1 - i) as f64,
                ..TypicalPodView::default()
            })
            .collect(),
        ..Default::default()
    };
    assert!(check_placement_sizes(&input, true).is_ok());
    let given = cel_typical(&input.typical);
    assert_eq!(given.len(), MAX_TYPICAL);
    assert_eq!(given.last().unwrap().share, 2.0, "the rarest is left out");
    // A typical pod's requests are capped like any requests map.
    input.typical[0].requests = (0..=MAX_RESOURCES)
        .map(|i| (format!("r{i}"), 1.0))
        .collect();
    assert!(
        check_placement_sizes(&input, false).is_ok(),
        "typical is not read"
    );
    let err = check_placement_sizes(&input, true).unwrap_err();
    assert!(
        err.to_string()
            .contains("typical[].requests (resources) has 33"),
        "{err}"
    );
    input.typical[0].requests.clear();
    input.nodes[0].devices[0].cards = vec![0.0; 257];
    let err = check_placement_sizes(&input, true).unwrap_err();
    assert!(err.to_string().contains("cards) has 257"), "{err}");
}
