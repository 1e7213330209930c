//! Flavor assignment: node constraints.

use super::*;

#[test]
fn node_selector_excludes_flavors_whose_labels_disagree() {
    let f = Fixture::kueue();
    let w = f.workload(
        "ml",
        vec![selecting(pods("main", 1, &[(GPU, 2)]), "gpu", "h100")],
    );
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
    // A key no flavor defines cannot be judged: it excludes nothing.
    let w = f.workload(
        "ml",
        vec![selecting(pods("main", 1, &[(GPU, 2)]), "rack", "r1")],
    );
    assert_eq!(f.chosen(&f.assign(&w, None, None)), [[(GPU, "a100")]]);
    // When nothing fits, each excluded flavor says so, in the order tried.
    let w = f.workload(
        "ml",
        vec![selecting(pods("main", 1, &[(GPU, 10)]), "gpu", "h100")],
    );
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::NoFit);
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                Problem::Excluded {
                    flavor: f.flavor("a100")
                },
                f.gpu_quota("h100", 10, 8, 8, 0, Some(0), 8),
                Problem::Excluded {
                    flavor: f.flavor("spot")
                },
            ]
        )
    );
}

#[test]
fn required_node_affinity_excludes_flavors() {
    let f = Fixture::kueue();
    let mut pod_set = pods("main", 1, &[(GPU, 2)]);
    pod_set.required_node_affinity = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: "NotIn".into(),
                values: Some(vec!["east".into()]),
            }]),
            match_fields: None,
        }],
    });
    let w = f.workload("ml", vec![pod_set]);
    let a = f.assign(&w, None, None);
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "h100")]]);
}

#[test]
fn a_taint_needs_a_toleration_from_the_pod_set_or_the_flavor() {
    let f = Fixture::kueue();
    let on_spot = || selecting(pods("main", 1, &[(GPU, 1)]), "gpu", "spot");
    let a = f.assign(&f.workload("ml", vec![on_spot()]), None, None);
    assert_eq!(a.mode, Mode::NoFit);
    // The index is into the flavor's nodeTaints: the PreferNoSchedule one is not judged.
    assert_eq!(
        a.not_fit,
        not_fit(
            0,
            vec![
                Problem::Excluded {
                    flavor: f.flavor("a100")
                },
                Problem::Excluded {
                    flavor: f.flavor("h100")
                },
                Problem::Taint {
                    flavor: f.flavor("spot"),
                    taint: 1
                },
            ]
        )
    );
    let wrong_value = Toleration {
        key: Some("spot".into()),
        operator: Some("Equal".into()),
        value: Some("false".into()),
        ..Toleration::default()
    };
    let a = f.assign(
        &f.workload("ml", vec![tolerating(on_spot(), wrong_value)]),
        None,
        None,
    );
    assert_eq!(a.mode, Mode::NoFit);
    let exists = Toleration {
        key: Some("spot".into()),
        operator: Some("Exists".into()),
        ..Toleration::default()
    };
    let a = f.assign(
        &f.workload("ml", vec![tolerating(on_spot(), exists)]),
        None,
        None,
    );
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "spot")]]);
    // `managed` tolerates its own NoExecute taint (tolerations it injects).
    let a = f.assign(
        &f.workload("solo", vec![pods("main", 1, &[(GPU, 1)])]),
        None,
        None,
    );
    assert_eq!(a.mode, Mode::Fit);
    assert_eq!(f.chosen(&a), [[(GPU, "managed")]]);
}
