//! The flavors in the views: `clusterQueue.flavors` (the queue's, in its
//! order) and `workload.eligibleFlavors` / `podSets[].eligibleFlavors`
//! (those its pod sets may use) reach a CEL flavor policy and a
//! WebAssembly one, so neither names a flavor to choose among them.

use super::*;

/// ClusterQueue `research` lists t4, a10 and spot (GPUs); spot's nodes
/// are tainted, so a workload without a toleration may use t4 and a10.
const CLUSTER: &str = "apiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: t4}\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: a10}\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: spot}\nspec:\n  \
nodeTaints: [{key: spot, value: \"true\", effect: NoSchedule}]\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: ClusterQueue\nmetadata: {name: research}\nspec:\n  resourceGroups:\n  \
- coveredResources: [nvidia.com/gpu]\n    flavors:\n    \
- {name: t4, resources: [{name: nvidia.com/gpu, nominalQuota: \"8\"}]}\n    \
- {name: a10, resources: [{name: nvidia.com/gpu, nominalQuota: \"8\"}]}\n    \
- {name: spot, resources: [{name: nvidia.com/gpu, nominalQuota: \"8\"}]}\n\
---\napiVersion: arbiter.dev/v1alpha1\nkind: LocalQueue\nmetadata: {name: q, namespace: research}\nspec: {clusterQueue: research}\n";

/// The flavor order `bundle` gives a one-GPU workload of `research`, by name.
fn order(bundle: Bundle) -> Option<Vec<String>> {
    let mut state = Scheduler::new(Arc::new(cluster_from(CLUSTER)), &[]);
    let id = submit(&mut state, "research", "train", 1, 0);
    let mut engine = engine(vec![bundle]);
    engine.begin(seconds(1));
    let entry = state.entry(id);
    let cq = entry.workload.cluster_queue;
    let answer = engine.flavor(&FlavorRequest {
        state: state.hook_state(),
        entry,
        cluster_queue: cq,
        candidates: state.hook_state().flavors(cq),
    })?;
    let cluster = state.cluster();
    Some(
        answer
            .flavors
            .iter()
            .map(|f| cluster.flavors[f.index()].name.clone())
            .collect(),
    )
}

#[test]
fn a_cel_flavor_policy_chooses_among_the_flavors_without_naming_them() {
    // Every flavor the workload may use but the queue's first.
    let policy = "  - name: not-first\n    hook: flavor\n    cel:\n      expression: >-\n        \
         clusterQueue.flavors.filter(f, f in workload.eligibleFlavors && f != clusterQueue.flavors[0])\n";
    assert_eq!(
        order(platform("flavors", policy)),
        Some(vec!["a10".to_string()])
    );
    let policy = "  - name: per-pod-set\n    hook: flavor\n    cel:\n      expression: >-\n        \
         workload.podSets[0].eligibleFlavors == ['t4', 'a10'] && workload.eligibleFlavors == ['t4', 'a10']\n        \
         && clusterQueue.flavors == ['t4', 'a10', 'spot'] ? ['spot'] : ['t4']\n";
    assert_eq!(
        order(platform("flavors", policy)),
        Some(vec!["spot".to_string()])
    );
}

/// A flavor plugin answering `["a10"]` when its request holds every one
/// of `needles`, else `["t4"]`: what it was sent, seen from inside.
fn seeing(needles: &[&str]) -> Vec<u8> {
    let mut data = String::new();
    let mut checks = String::new();
    let mut at = 2048;
    for needle in needles {
        let escaped = needle.replace('\\', "\\\\").replace('"', "\\\"");
        data.push_str(&format!("(data (i32.const {at}) \"{escaped}\")\n"));
        checks.push_str(&format!(
            "(br_if $no (i32.eqz (call $find (local.get $p) (local.get $n) (i32.const {at}) (i32.const {len}))))\n",
            len = needle.len()
        ));
        at += needle.len() + 16;
    }
    let (yes, no) = (r#"{"flavors":["a10"]}"#, r#"{"flavors":["t4"]}"#);
    let packed = |ptr: u64, len: usize| (ptr << 32) | len as u64;
    wat::parse_str(format!(
        r#"(module
          (memory (export "memory") 4)
          (data (i32.const 1024) "{yes_escaped}")
          (data (i32.const 1536) "{no_escaped}")
          {data}
          (func (export "arbiter_abi_version") (result i32) i32.const 1)
          (func (export "arbiter_alloc") (param i32) (result i32) i32.const 8192)
          ;; 1 if the `len` bytes at `needle` occur in the `n` bytes at `p`.
          (func $find (param $p i32) (param $n i32) (param $needle i32) (param $len i32) (result i32)
            (local $i i32) (local $j i32)
            (block $absent
              (loop $start
                (br_if $absent (i32.gt_u (i32.add (local.get $i) (local.get $len)) (local.get $n)))
                (local.set $j (i32.const 0))
                (block $mismatch
                  (loop $compare
                    (if (i32.eq (local.get $j) (local.get $len)) (then (return (i32.const 1))))
                    (br_if $mismatch
                      (i32.ne
                        (i32.load8_u (i32.add (local.get $p) (i32.add (local.get $i) (local.get $j))))
                        (i32.load8_u (i32.add (local.get $needle) (local.get $j)))))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br $compare)))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $start)))
            (i32.const 0))
          (func (export "arbiter_flavor") (param $p i32) (param $n i32) (result i64)
            (block $no
              {checks}
              (return (i64.const {yes_packed})))
            (i64.const {no_packed})))"#,
        yes_escaped = yes.replace('"', "\\\""),
        no_escaped = no.replace('"', "\\\""),
        yes_packed = packed(1024, yes.len()),
        no_packed = packed(1536, no.len()),
    ))
    .expect("valid WAT")
}

#[test]
fn a_flavor_plugin_is_sent_the_queues_flavors_and_those_the_workload_may_use() {
    let bundle = |needles: &[&str]| {
        load_configmap(
            "platform",
            "plugin",
            None,
            "  - {name: seeing, hook: flavor, wasm: {module: seeing.wasm}}\n",
            &[("seeing.wasm", seeing(needles))],
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let sent = [
        r#""flavors":["t4","a10","spot"]"#,
        r#""eligibleFlavors":["t4","a10"]"#,
    ];
    assert_eq!(order(bundle(&sent)), Some(vec!["a10".to_string()]));
    // The plugin tells what it was not sent.
    let not_sent = [r#""eligibleFlavors":["t4","a10","spot"]"#];
    assert_eq!(order(bundle(&not_sent)), Some(vec!["t4".to_string()]));
}
