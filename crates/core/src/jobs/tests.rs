//! What the job integrations promise, kind by kind: realistic jobs in,
//! pod-set names, counts and per-pod requests out; hold and release; clear
//! errors (never panics) on bad jobs and bad integrations.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;

fn yaml(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap()
}

fn extract(text: &str) -> JobInfo {
    Integrations::builtin()
        .extract(&yaml(text))
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("a known job kind")
}

fn extract_error(integrations: &Integrations, text: &str) -> String {
    match integrations.extract(&yaml(text)) {
        Err(e) => e.to_string(),
        Ok(info) => panic!("expected an error, got {info:?}"),
    }
}

/// (name, count, requests) per pod set, requests as quantity strings.
fn shape(info: &JobInfo) -> Vec<(String, u32, BTreeMap<String, String>)> {
    info.pod_sets
        .iter()
        .map(|p| {
            let requests = p
                .requests
                .iter()
                .map(|(r, a)| (r.clone(), a.to_quantity_string()))
                .collect();
            (p.name.clone(), p.count, requests)
        })
        .collect()
}

fn pod_set(
    name: &str,
    count: u32,
    requests: &[(&str, &str)],
) -> (String, u32, BTreeMap<String, String>) {
    let requests = requests
        .iter()
        .map(|(r, q)| {
            (
                r.to_string(),
                Amount::parse(q).unwrap().to_quantity_string(),
            )
        })
        .collect();
    (name.to_string(), count, requests)
}

#[test]
fn every_builtin_compiles_and_integration_is_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Integrations>();
    let integrations = Integrations::builtin();
    assert_eq!(integrations.kinds().count(), builtin_integrations().len());
    for spec in builtin_integrations() {
        assert!(
            integrations.find(&spec.api_version, &spec.kind).is_some(),
            "{}",
            spec.gvk()
        );
    }
}

#[test]
fn batch_job() {
    let info = extract(
        r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: user-queue, arbiter.dev/priority-class: high}
  annotations: {sim.arbiter.dev/runtime: 10m}
spec:
  parallelism: 3
  completions: 10
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
        resources:
          requests: {cpu: 1, memory: 200Mi}
          limits: {nvidia.com/gpu: 1}
"#,
    );
    assert_eq!(
        shape(&info),
        [pod_set(
            "main",
            3,
            &[("cpu", "1"), ("memory", "200Mi"), ("nvidia.com/gpu", "1")]
        )]
    );
    assert_eq!(
        (info.api_version.as_str(), info.kind.as_str()),
        ("batch/v1", "Job")
    );
    assert_eq!(
        (info.namespace.as_str(), info.name.as_str()),
        ("team-a", "sample-job")
    );
    assert_eq!(info.queue_name.as_deref(), Some("user-queue"));
    assert_eq!(info.priority_class.as_deref(), Some("high"));
    assert_eq!(info.annotations["sim.arbiter.dev/runtime"], "10m");
}

#[test]
fn batch_job_defaults_and_completions_cap() {
    let job = |spec: &str| {
        extract(&format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec:\n{spec}  template:\n    spec:\n      containers: [{{name: c}}]\n"
        ))
    };
    let defaulted = job("");
    assert_eq!(defaulted.pod_sets[0].count, 1);
    assert_eq!(defaulted.namespace, "default");
    assert_eq!(defaulted.queue_name, None);
    assert_eq!(
        job("  parallelism: 8\n  completions: 2\n").pod_sets[0].count,
        2
    );
}

#[test]
fn a_pod_set_over_the_pod_cap_is_refused_with_field_value_and_cap() {
    // parallelism 2147483647 with cpu: 1m spent minutes in one placement.
    let job = |parallelism: u64| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: wide}}\nspec:\n  parallelism: {parallelism}\n  template:\n    spec:\n      containers: [{{name: c, resources: {{requests: {{cpu: 1m}}}}}}]\n"
        )
    };
    let message = extract_error(&Integrations::builtin(), &job(2_147_483_647));
    assert!(
        message.contains("2147483647")
            && message.contains("more than the 100000 pods a pod set may have"),
        "{message}"
    );
    assert_eq!(extract(&job(100_000)).pod_sets[0].count, 100_000);
}

#[test]
fn arbiter_labels_win_over_kueue_labels() {
    let info = extract(
        r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: j
  labels:
    kueue.x-k8s.io/queue-name: kueue-queue
    arbiter.dev/queue-name: arbiter-queue
    kueue.x-k8s.io/priority-class: low
spec:
  template: {spec: {containers: [{name: c}]}}
"#,
    );
    assert_eq!(info.queue_name.as_deref(), Some("arbiter-queue"));
    assert_eq!(info.priority_class.as_deref(), Some("low"));
}

#[test]
fn pytorch_job_master_and_workers() {
    let info = extract(
        r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytorch-simple
  namespace: kubeflow
  labels: {arbiter.dev/queue-name: gpu-queue}
spec:
  runPolicy: {suspend: true}
  pytorchReplicaSpecs:
    Worker:
      replicas: 4
      restartPolicy: OnFailure
      template:
        spec:
          nodeSelector: {cloud.google.com/gke-accelerator: nvidia-tesla-a100}
          tolerations:
          - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
          containers:
          - name: pytorch
            image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
            command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
            resources:
              limits: {nvidia.com/gpu: 8, cpu: "32", memory: 256Gi}
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
            resources:
              requests: {cpu: "4", memory: 16Gi}
"#,
    );
    assert_eq!(
        shape(&info),
        [
            pod_set("master", 1, &[("cpu", "4"), ("memory", "16Gi")]),
            pod_set(
                "worker",
                4,
                &[("cpu", "32"), ("memory", "256Gi"), ("nvidia.com/gpu", "8")]
            ),
        ]
    );
    let worker = &info.pod_sets[1];
    assert_eq!(
        worker.node_selector["cloud.google.com/gke-accelerator"],
        "nvidia-tesla-a100"
    );
    assert_eq!(worker.tolerations.len(), 1);
    assert_eq!(info.queue_name.as_deref(), Some("gpu-queue"));
}

#[test]
fn tf_job_chief_ps_and_workers() {
    let info = extract(
        r#"
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist-mnist, namespace: research}
spec:
  tfReplicaSpecs:
    PS:
      replicas: 2
      template:
        spec:
          containers:
          - {name: tensorflow, image: kubeflow/tf-dist-mnist-test:1.0, resources: {requests: {cpu: "2", memory: 4Gi}}}
    Chief:
      template:
        spec:
          containers:
          - {name: tensorflow, image: kubeflow/tf-dist-mnist-test:1.0, resources: {requests: {cpu: "1", memory: 2Gi}}}
    Worker:
      replicas: 3
      template:
        spec:
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                - matchExpressions:
                  - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}
          containers:
          - {name: tensorflow, image: kubeflow/tf-dist-mnist-test:1.0, resources: {limits: {nvidia.com/gpu: "2"}, requests: {cpu: "8", memory: 32Gi}}}
"#,
    );
    assert_eq!(
        shape(&info),
        [
            pod_set("chief", 1, &[("cpu", "1"), ("memory", "2Gi")]),
            pod_set("ps", 2, &[("cpu", "2"), ("memory", "4Gi")]),
            pod_set(
                "worker",
                3,
                &[("cpu", "8"), ("memory", "32Gi"), ("nvidia.com/gpu", "2")]
            ),
        ]
    );
    let affinity = info.pod_sets[2].required_node_affinity.as_ref().unwrap();
    assert_eq!(
        affinity.node_selector_terms[0]
            .match_expressions
            .as_ref()
            .unwrap()[0]
            .key,
        "nvidia.com/gpu.product"
    );
}

fn replica_job(api_version: &str, kind: &str, field: &str, replicas: &str) -> String {
    format!(
        "apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: job, namespace: ml}}\n\
         spec:\n  runPolicy: {{cleanPodPolicy: None}}\n  {field}:\n{replicas}"
    )
}

#[test]
fn xgboost_paddle_and_jax_jobs() {
    let replicas = "    Master:\n      replicas: 1\n      template: {spec: {containers: [{name: m, resources: {requests: {cpu: '2'}}}]}}\n\
                    \x20   Worker:\n      replicas: 2\n      template: {spec: {containers: [{name: w, resources: {requests: {cpu: '4', nvidia.com/gpu: '1'}}}]}}\n";
    for (kind, field) in [
        ("XGBoostJob", "xgbReplicaSpecs"),
        ("PaddleJob", "paddleReplicaSpecs"),
    ] {
        let info = extract(&replica_job("kubeflow.org/v1", kind, field, replicas));
        assert_eq!(
            shape(&info),
            [
                pod_set("master", 1, &[("cpu", "2")]),
                pod_set("worker", 2, &[("cpu", "4"), ("nvidia.com/gpu", "1")]),
            ],
            "{kind}"
        );
    }
    let jax = extract(&replica_job(
        "kubeflow.org/v1",
        "JAXJob",
        "jaxReplicaSpecs",
        "    Worker:\n      replicas: 16\n      template: {spec: {containers: [{name: jax, resources: {limits: {google.com/tpu: '4'}}}]}}\n",
    ));
    assert_eq!(
        shape(&jax),
        [pod_set("worker", 16, &[("google.com/tpu", "4")])]
    );
}

#[test]
fn mpi_job_launcher_and_workers() {
    let job = r#"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: tensorflow-benchmarks}
spec:
  slotsPerWorker: 1
  runPolicy: {cleanPodPolicy: Running}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - image: mpioperator/tensorflow-benchmarks:latest
            name: tensorflow-benchmarks
            command: [mpirun, python, scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py]
            resources: {requests: {cpu: 500m, memory: 1Gi}}
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - image: mpioperator/tensorflow-benchmarks:latest
            name: tensorflow-benchmarks
            resources:
              limits: {nvidia.com/gpu: 1}
"#;
    let expected = [
        pod_set("launcher", 1, &[("cpu", "500m"), ("memory", "1Gi")]),
        pod_set("worker", 2, &[("nvidia.com/gpu", "1")]),
    ];
    assert_eq!(shape(&extract(job)), expected);
    // The training operator's kubeflow.org/v1 MPIJob has the same shape.
    let v1 = job.replace("kubeflow.org/v2beta1", "kubeflow.org/v1");
    assert_eq!(shape(&extract(&v1)), expected);
}

#[test]
fn train_job_nodes() {
    let info = extract(
        r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: fine-tune-llama, namespace: llm}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: docker.io/kubeflow/pytorch-llm:latest
    numNodes: 4
    resourcesPerNode:
      requests: {cpu: "16"}
      limits: {cpu: "32", nvidia.com/gpu: "8", memory: 512Gi}
"#,
    );
    assert_eq!(
        shape(&info),
        [pod_set(
            "node",
            4,
            &[("cpu", "16"), ("memory", "512Gi"), ("nvidia.com/gpu", "8")]
        )]
    );
    let bare = extract(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\n\
         spec: {runtimeRef: {name: torch-distributed}}",
    );
    assert_eq!(shape(&bare), [pod_set("node", 1, &[])]);
}

#[test]
fn argo_workflow_one_pod_set_per_pod_template() {
    let info = extract(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: kfp-train-pipeline-x7k2p, namespace: kubeflow-user}
spec:
  entrypoint: pipeline
  nodeSelector: {pool: cpu}
  templates:
  - name: pipeline
    dag:
      tasks:
      - {name: preprocess, template: preprocess}
      - {name: train, template: train, dependencies: [preprocess]}
      - {name: report, template: report, dependencies: [train]}
  - name: preprocess
    container:
      image: python:3.12
      command: [python, -c, "print('prep')"]
      resources: {requests: {cpu: "2", memory: 8Gi}}
  - name: train
    nodeSelector: {pool: a100}
    initContainers:
    - {name: fetch, image: busybox, resources: {requests: {cpu: "6"}}}
    container:
      image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
      resources: {limits: {nvidia.com/gpu: "4"}, requests: {cpu: "4", memory: 64Gi}}
    sidecars:
    - {name: tensorboard, image: tensorflow/tensorflow, resources: {requests: {cpu: 500m}}}
  - name: report
    script:
      image: python:3.12
      source: print("done")
      resources: {requests: {cpu: 250m}}
  - name: pause
    suspend: {}
"#,
    );
    assert_eq!(
        shape(&info),
        [
            pod_set("preprocess", 1, &[("cpu", "2"), ("memory", "8Gi")]),
            pod_set(
                "train",
                1,
                &[("cpu", "6"), ("memory", "64Gi"), ("nvidia.com/gpu", "4")]
            ),
            pod_set("report", 1, &[("cpu", "250m")]),
        ]
    );
    assert_eq!(info.pod_sets[0].node_selector["pool"], "cpu");
    assert_eq!(info.pod_sets[1].node_selector["pool"], "a100");
}

#[test]
fn tekton_pipeline_run_one_pod_set_per_inline_task() {
    let info = extract(
        r#"
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: build-and-train, namespace: ci}
spec:
  taskRunTemplate:
    podTemplate:
      nodeSelector: {pool: gpu}
  pipelineSpec:
    tasks:
    - name: fetch
      taskSpec:
        steps:
        - {name: clone, image: alpine/git, computeResources: {requests: {cpu: 500m, memory: 256Mi}}}
        - {name: unpack, image: busybox, computeResources: {requests: {cpu: "1"}}}
    - name: train
      runAfter: [fetch]
      taskSpec:
        steps:
        - image: pytorch/pytorch
          computeResources: {limits: {nvidia.com/gpu: "2"}, requests: {cpu: "8"}}
        sidecars:
        - {name: metrics, image: prom/pushgateway, computeResources: {requests: {cpu: 100m}}}
    - name: referenced
      taskRef: {name: some-cluster-task}
    finally:
    - name: notify
      taskSpec:
        steps:
        - {name: send, image: curlimages/curl}
"#,
    );
    assert_eq!(
        shape(&info),
        [
            pod_set("fetch", 1, &[("cpu", "1500m"), ("memory", "256Mi")]),
            pod_set("train", 1, &[("cpu", "8100m"), ("nvidia.com/gpu", "2")]),
            pod_set("notify", 1, &[]),
        ]
    );
    assert_eq!(info.pod_sets[1].node_selector["pool"], "gpu");
}

#[test]
fn unknown_kinds_and_non_objects_are_not_jobs() {
    let integrations = Integrations::builtin();
    for object in [
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PipelineRun", "metadata": {"name": "p"}}),
        json!({"kind": "Job"}),
        json!("a string"),
    ] {
        assert_eq!(integrations.extract(&object).unwrap(), None, "{object}");
    }
}

// ---------------------------------------------------------------- hold / release

/// A minimal valid job of every built-in kind.
fn one_of_each_kind() -> Vec<Value> {
    let replicas = |api: &str, kind: &str, field: &str, replica: &str| {
        yaml(&format!(
            "apiVersion: {api}\nkind: {kind}\nmetadata: {{name: j}}\nspec:\n  {field}:\n    {replica}:\n      template: {{spec: {{containers: [{{name: c}}]}}}}\n"
        ))
    };
    vec![
        yaml("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {containers: [{name: c}]}}}"),
        replicas("kubeflow.org/v1", "PyTorchJob", "pytorchReplicaSpecs", "Master"),
        replicas("kubeflow.org/v1", "TFJob", "tfReplicaSpecs", "Chief"),
        replicas("kubeflow.org/v1", "XGBoostJob", "xgbReplicaSpecs", "Master"),
        replicas("kubeflow.org/v1", "PaddleJob", "paddleReplicaSpecs", "Worker"),
        replicas("kubeflow.org/v1", "JAXJob", "jaxReplicaSpecs", "Worker"),
        replicas("kubeflow.org/v2beta1", "MPIJob", "mpiReplicaSpecs", "Launcher"),
        replicas("kubeflow.org/v1", "MPIJob", "mpiReplicaSpecs", "Worker"),
        yaml("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\nspec: {runtimeRef: {name: r}}"),
        yaml("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: j}\nspec: {templates: [{name: a, container: {image: x}}]}"),
        yaml("apiVersion: tekton.dev/v1\nkind: PipelineRun\nmetadata: {name: j}\nspec: {pipelineSpec: {tasks: [{name: a, taskSpec: {steps: [{image: x}]}}]}}"),
    ]
}

#[test]
fn every_builtin_kind_has_a_test_job() {
    let mut tested: Vec<(String, String)> = one_of_each_kind()
        .iter()
        .map(|o| {
            (
                o["apiVersion"].as_str().unwrap().into(),
                o["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    tested.sort();
    let mut builtin: Vec<(String, String)> = Integrations::builtin()
        .kinds()
        .map(|(a, k)| (a.to_string(), k.to_string()))
        .collect();
    builtin.sort();
    assert_eq!(tested, builtin);
}

#[test]
fn hold_and_release_round_trip_on_every_kind() {
    let integrations = Integrations::builtin();
    for mut object in one_of_each_kind() {
        let original = object.clone();
        let gvk = format!("{} {}", object["apiVersion"], object["kind"]);
        let integration = integrations
            .find(
                object["apiVersion"].as_str().unwrap(),
                object["kind"].as_str().unwrap(),
            )
            .unwrap();
        integrations
            .extract(&object)
            .unwrap_or_else(|e| panic!("{gvk}: {e}"));
        assert!(!integration.is_held(&object), "{gvk}");
        integration.set_held(&mut object, true).unwrap();
        assert!(integration.is_held(&object), "{gvk}");
        assert_ne!(object, original, "{gvk}");
        integration.set_held(&mut object, true).unwrap();
        assert!(integration.is_held(&object), "{gvk}: holding twice");
        integration.set_held(&mut object, false).unwrap();
        assert!(!integration.is_held(&object), "{gvk}");
        integration.set_held(&mut object, false).unwrap();
        assert!(!integration.is_held(&object), "{gvk}: releasing twice");
    }
}

#[test]
fn hold_writes_the_documented_fields() {
    let integrations = Integrations::builtin();
    let mut pytorch = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {}});
    let integration = integrations.find("kubeflow.org/v1", "PyTorchJob").unwrap();
    integration.set_held(&mut pytorch, true).unwrap();
    assert_eq!(pytorch["spec"]["runPolicy"]["suspend"], json!(true));
    integration.set_held(&mut pytorch, false).unwrap();
    assert_eq!(pytorch["spec"]["runPolicy"]["suspend"], json!(false));

    let tekton = integrations.find("tekton.dev/v1", "PipelineRun").unwrap();
    let mut run = json!({"spec": {"pipelineRef": {"name": "p"}}});
    tekton.set_held(&mut run, true).unwrap();
    assert_eq!(run["spec"]["status"], json!("PipelineRunPending"));
    tekton.set_held(&mut run, false).unwrap();
    assert_eq!(run, json!({"spec": {"pipelineRef": {"name": "p"}}}));

    // Releasing leaves a status someone else set alone.
    let mut cancelled = json!({"spec": {"status": "Cancelled"}});
    tekton.set_held(&mut cancelled, false).unwrap();
    assert_eq!(cancelled["spec"]["status"], json!("Cancelled"));
}

#[test]
fn holding_a_job_whose_spec_is_not_an_object_is_an_error() {
    let integrations = Integrations::builtin();
    let job = integrations.find("batch/v1", "Job").unwrap();
    let mut object = json!({"metadata": {"name": "weird", "namespace": "ns"}, "spec": "oops"});
    let message = job.set_held(&mut object, true).unwrap_err().to_string();
    assert!(message.contains("Job ns/weird"), "{message}");
    assert!(
        message.contains("`spec` is the string \"oops\""),
        "{message}"
    );
}

// ---------------------------------------------------------------- user-defined kinds

const KFP_V1_PIPELINE_RUN: &str = r#"
apiVersion: arbiter.dev/v1alpha1
kind: JobIntegration
metadata: {name: kfp-v1-pipelinerun}
spec:
  jobApiVersion: kubeflow.org/v1
  jobKind: PipelineRun
  podSets: >-
    object.spec.steps.map(s, {
      'name': s.name,
      'count': has(s.parallelism) ? s.parallelism : 1,
      'requests': s.resources
    })
  hold: {path: spec.paused, held: true, released: null}
"#;

#[test]
fn a_user_defined_kind_works_without_code() {
    let (spec, warnings) = IntegrationSpec::from_manifest_yaml(KFP_V1_PIPELINE_RUN).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let integrations = Integrations::with_extra(vec![spec]).unwrap();
    let mut run = yaml(
        r#"
apiVersion: kubeflow.org/v1
kind: PipelineRun
metadata:
  name: churn-model
  namespace: analytics
  labels: {arbiter.dev/queue-name: pipelines}
spec:
  steps:
  - {name: ingest, resources: {cpu: "2", memory: 4Gi}}
  - {name: train, parallelism: 4, resources: {cpu: "8", nvidia.com/gpu: "1"}}
"#,
    );
    let info = integrations.extract(&run).unwrap().unwrap();
    assert_eq!(
        shape(&info),
        [
            pod_set("ingest", 1, &[("cpu", "2"), ("memory", "4Gi")]),
            pod_set("train", 4, &[("cpu", "8"), ("nvidia.com/gpu", "1")]),
        ]
    );
    assert_eq!(info.queue_name.as_deref(), Some("pipelines"));

    let integration = integrations.find("kubeflow.org/v1", "PipelineRun").unwrap();
    integration.set_held(&mut run, true).unwrap();
    assert_eq!(run["spec"]["paused"], json!(true));
    assert!(integration.is_held(&run));
    integration.set_held(&mut run, false).unwrap();
    assert!(run["spec"].get("paused").is_none());
    // The built-ins are still there.
    assert!(integrations.find("batch/v1", "Job").is_some());
}

#[test]
fn a_cel_syntax_error_names_the_integration() {
    let (mut spec, _) = IntegrationSpec::from_manifest_yaml(KFP_V1_PIPELINE_RUN).unwrap();
    spec.pod_sets = "object.spec.steps.map(s, {'name': s.name".into();
    let message = Integrations::with_extra(vec![spec])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("`kubeflow.org/v1 PipelineRun`"),
        "{message}"
    );
    assert!(message.contains("does not compile"), "{message}");
}

#[test]
fn bad_hold_specs_and_duplicates_are_refused() {
    let (spec, _) = IntegrationSpec::from_manifest_yaml(KFP_V1_PIPELINE_RUN).unwrap();
    let mut bad_path = spec.clone();
    bad_path.hold.path = "spec..paused".into();
    let message = Integrations::with_extra(vec![bad_path])
        .unwrap_err()
        .to_string();
    assert!(message.contains("hold path `spec..paused`"), "{message}");

    let mut null_held = spec.clone();
    null_held.hold.held = Value::Null;
    assert!(Integrations::with_extra(vec![null_held]).is_err());

    let message = Integrations::with_extra(vec![spec.clone(), spec])
        .unwrap_err()
        .to_string();
    assert!(message.contains("defined twice"), "{message}");
}

#[test]
fn a_user_defined_kind_may_replace_a_builtin() {
    let mut spec = builtin_integrations()
        .into_iter()
        .find(|s| s.kind == "Job")
        .unwrap();
    spec.pod_sets = "[{'name': 'main', 'count': 7, 'requests': {'cpu': '1'}}]".into();
    let integrations = Integrations::with_extra(vec![spec]).unwrap();
    let info = integrations
        .extract(&json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}))
        .unwrap()
        .unwrap();
    assert_eq!(shape(&info), [pod_set("main", 7, &[("cpu", "1")])]);
}

// ---------------------------------------------------------------- bad input

fn with_pod_sets(expression: &str) -> Integrations {
    Integrations::with_extra(vec![IntegrationSpec {
        api_version: "example.com/v1".into(),
        kind: "Thing".into(),
        pod_sets: expression.into(),
        hold: HoldSpec {
            path: "spec.suspend".into(),
            held: json!(true),
            released: json!(false),
            clear_status: Vec::new(),
        },
        finished: None,
        generated: Vec::new(),
        pods_ready: None,
    }])
    .unwrap()
}

const THING: &str =
    "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: ns}\nspec: {}";

#[test]
fn replicas_that_are_not_a_whole_number_are_errors() {
    let integrations = Integrations::builtin();
    let job = |replicas: &str| {
        replica_job(
            "kubeflow.org/v1",
            "PyTorchJob",
            "pytorchReplicaSpecs",
            &format!("    Worker:\n      replicas: {replicas}\n      template: {{spec: {{containers: [{{name: c}}]}}}}\n"),
        )
    };
    let message = extract_error(&integrations, &job("abc"));
    assert!(message.contains("PyTorchJob ml/job"), "{message}");
    assert!(message.contains("pod set `worker`"), "{message}");
    assert!(
        message.contains("`count` is the string \"abc\""),
        "{message}"
    );
    let message = extract_error(&integrations, &job("-2"));
    assert!(message.contains("negative"), "{message}");
    let message = extract_error(&integrations, &job("1.5"));
    assert!(message.contains("not a whole number"), "{message}");
    assert_eq!(
        integrations
            .extract(&yaml(&job("0")))
            .unwrap()
            .unwrap()
            .pod_sets[0]
            .count,
        0
    );
}

#[test]
fn a_template_that_is_not_an_object_is_an_error() {
    let message = extract_error(
        &Integrations::builtin(),
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec: {template: \"pod please\"}",
    );
    assert!(message.contains("Job ns/j, pod set `main`"), "{message}");
    assert!(
        message.contains("`template` is the string \"pod please\""),
        "{message}"
    );
}

#[test]
fn a_malformed_template_names_the_field() {
    let message = extract_error(
        &Integrations::builtin(),
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n\
         spec: {template: {spec: {containers: [{name: c, resources: {requests: [1, 2]}}]}}}",
    );
    assert!(
        message.contains("`template.spec.containers[0].resources.requests`"),
        "{message}"
    );
}

#[test]
fn a_bad_quantity_names_job_pod_set_container_and_resource() {
    let message = extract_error(
        &Integrations::builtin(),
        r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bad-quantity, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - {name: pytorch, resources: {requests: {memory: 12x}}}
"#,
    );
    for part in [
        "PyTorchJob ml/bad-quantity",
        "pod set `worker`",
        "container `pytorch`",
        "`memory`",
        "`12x`",
    ] {
        assert!(message.contains(part), "{part} missing in: {message}");
    }
}

#[test]
fn a_job_without_pod_sets_is_a_clear_error() {
    let integrations = Integrations::builtin();
    let message = extract_error(
        &integrations,
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: empty, namespace: ml}\nspec: {pytorchReplicaSpecs: {}}",
    );
    assert!(message.contains("PyTorchJob ml/empty"), "{message}");
    assert!(message.contains("no pod sets"), "{message}");

    let message = extract_error(
        &integrations,
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: bare, namespace: ml}\nspec: {runPolicy: {}}",
    );
    assert!(message.contains("PyTorchJob ml/bare"), "{message}");
    assert!(message.contains("pytorchReplicaSpecs"), "{message}");
}

#[test]
fn a_job_without_a_name_is_an_error() {
    let message = extract_error(
        &Integrations::builtin(),
        "apiVersion: batch/v1\nkind: Job\nmetadata: {namespace: ns}\nspec: {template: {spec: {containers: []}}}",
    );
    assert!(
        message.contains("Job ns/<unnamed>: has no `metadata.name`"),
        "{message}"
    );
}

#[test]
fn bad_expression_output_shapes_are_errors() {
    let cases = [
        ("{'name': 'x'}", "expected a list of pod sets"),
        ("['x']", "pod set `#0`"),
        ("[{'count': 1}]", "`name` is missing"),
        ("[{'name': 'a'}, {'name': 'a'}]", "must be unique"),
        (
            "[{'name': 'a', 'replicas': 2}]",
            "`replicas` is not a pod-set field",
        ),
        (
            "[{'name': 'a', 'count': 2, 'minCount': 3}]",
            "`minCount` is 3, more than the pod set's count 2",
        ),
        (
            "[{'name': 'a', 'template': {}, 'requests': {}}]",
            "give one or the other",
        ),
        (
            "[{'name': 'a', 'requests': {'cpu': '12x'}}]",
            "requests `cpu`",
        ),
        (
            "[{'name': 'a', 'requests': ['cpu']}]",
            "`requests` is invalid: invalid type: sequence, expected a map",
        ),
        (
            "[{'name': 'a', 'template': {'spec': {'containers': 'c'}}}]",
            "`template.spec.containers` is invalid",
        ),
        ("object.spec.missing", "No such key: missing"),
    ];
    for (expression, expected) in cases {
        let message = extract_error(&with_pod_sets(expression), THING);
        assert!(message.contains("Thing ns/t"), "{expression}: {message}");
        assert!(message.contains(expected), "{expression}: {message}");
    }
}

#[test]
fn json_integers_are_cel_ints() {
    let integrations = with_pod_sets(
        "[{'name': 'a', 'count': object.spec.replicas * 2, 'minCount': object.spec.replicas}]",
    );
    let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
                       "metadata": {"name": "t"}, "spec": {"replicas": 3}});
    let info = integrations.extract(&thing).unwrap().unwrap();
    assert_eq!(
        (info.pod_sets[0].count, info.pod_sets[0].min_count),
        (6, Some(3))
    );
}

// ---------------------------------------------------------------- Workload

#[test]
fn workload_pod_sets_from_template_and_from_requests() {
    let wl: Workload = serde_yaml_ng::from_str(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: Workload
metadata:
  name: wl-1
  labels: {kueue.x-k8s.io/queue-name: from-label}
spec:
  queueName: lq-1
  priorityClassName: high
  podSets:
  - name: driver
    count: 1
    template:
      spec:
        tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
        containers: [{name: d, resources: {requests: {cpu: "2"}}}]
  - name: main
    count: 8
    minCount: 4
    requests: {nvidia.com/gpu: "1", cpu: 500m}
"#,
    )
    .unwrap();
    let info = job_info_from_workload(&wl).unwrap();
    assert_eq!(
        (info.kind.as_str(), info.namespace.as_str()),
        ("Workload", "default")
    );
    assert_eq!(info.queue_name.as_deref(), Some("lq-1"));
    assert_eq!(info.priority_class.as_deref(), Some("high"));
    assert_eq!(
        shape(&info),
        [
            pod_set("driver", 1, &[("cpu", "2")]),
            pod_set("main", 8, &[("cpu", "500m"), ("nvidia.com/gpu", "1")]),
        ]
    );
    assert_eq!(info.pod_sets[1].min_count, Some(4));
    assert_eq!(info.pod_sets[0].tolerations.len(), 1);
}

#[test]
fn workload_errors_name_the_workload_and_pod_set() {
    let workload = |pod_sets: &str| -> Workload {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: arbiter.dev/v1alpha1\nkind: Workload\nmetadata: {{name: wl, namespace: ns}}\nspec:\n  podSets: {pod_sets}"
        ))
        .unwrap()
    };
    let message = job_info_from_workload(&workload("[{name: main, requests: {cpu: 12x}}]"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Workload ns/wl, pod set `main`"),
        "{message}"
    );
    assert!(message.contains("`cpu`"), "{message}");
    let message = job_info_from_workload(&workload("[]"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("no `spec.podSets`"), "{message}");
    let message = job_info_from_workload(&workload("[{name: a}, {name: a}]"))
        .unwrap_err()
        .to_string();
    assert!(message.contains("unique"), "{message}");
}

#[test]
fn pod_set_cel_is_bounded_like_policy_cel() {
    let (spec, _) = IntegrationSpec::from_manifest_yaml(KFP_V1_PIPELINE_RUN).unwrap();
    let with = |pod_sets: String| IntegrationSpec {
        pod_sets,
        ..spec.clone()
    };
    // three nested comprehensions: refused at load
    let nested = with(
        "object.spec.steps.map(a, object.spec.steps.map(b, object.spec.steps.map(c, 1)))".into(),
    );
    let message = Integrations::with_extra(vec![nested])
        .unwrap_err()
        .to_string();
    assert!(message.contains("nest 3 deep; at most 2"), "{message}");
    // a syntax error past column 65,535 (which cel's parser panics on)
    let long = with(format!("{} +", "1 + ".repeat(20_000)));
    let message = Integrations::with_extra(vec![long])
        .unwrap_err()
        .to_string();
    assert!(message.contains("bytes long; at most 16384"), "{message}");
    // no `replace` (chained, it built gigabytes)
    let replace = with(
        "[{'name': object.metadata.name.replace('a', object.metadata.name + object.metadata.name)}]"
            .into(),
    );
    let integrations = Integrations::with_extra(vec![replace]).unwrap();
    let run = yaml(
        "apiVersion: kubeflow.org/v1\nkind: PipelineRun\nmetadata: {name: aaaa}\nspec: {steps: []}",
    );
    let message = integrations.extract(&run).unwrap_err().to_string();
    assert!(message.contains("replace"), "{message}");
    // within the estimate for the sizes it assumes, stopped at run time on a bigger job
    let pairs = with(
        "[{'name': string(size(object.spec.steps.map(a, object.spec.steps.map(b, a * b))))}]"
            .into(),
    );
    let integrations = Integrations::with_extra(vec![pairs]).unwrap();
    let steps = (0..2_000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let run = yaml(&format!(
        "apiVersion: kubeflow.org/v1\nkind: PipelineRun\nmetadata: {{name: big}}\nspec: {{steps: [{steps}]}}"
    ));
    let message = integrations.extract(&run).unwrap_err().to_string();
    assert!(
        message.contains("exceeded its budget of 1000000"),
        "{message}"
    );
    assert!(message.contains("PipelineRun"), "{message}");
}

// ---------------------------------------------------------------- template paths

#[test]
fn builtin_pod_sets_name_where_their_template_sits() {
    let job = extract(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  template: {spec: {containers: [{name: c, image: x}]}}
"#,
    );
    assert_eq!(
        job.pod_sets[0].template_path.as_deref(),
        Some("spec.template")
    );
    let pytorch = extract(
        r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: p, namespace: ns}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}
    Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}
"#,
    );
    let paths: Vec<_> = pytorch
        .pod_sets
        .iter()
        .map(|p| p.template_path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            Some("spec.pytorchReplicaSpecs.Master.template".to_string()),
            Some("spec.pytorchReplicaSpecs.Worker.template".to_string())
        ]
    );
}

#[test]
fn a_template_path_that_is_not_a_field_path_is_refused() {
    let (mut spec, _) = IntegrationSpec::from_manifest_yaml(KFP_V1_PIPELINE_RUN).unwrap();
    spec.pod_sets = "object.spec.steps.map(s, {'name': s.name, 'templatePath': 'spec..x'})".into();
    let integrations = Integrations::with_extra(vec![spec]).unwrap();
    let message = extract_error(
        &integrations,
        r#"
apiVersion: kubeflow.org/v1
kind: PipelineRun
metadata: {name: run, namespace: ns}
spec:
  steps: [{name: train}]
"#,
    );
    assert!(message.contains("templatePath"), "{message}");
    assert!(message.contains("field path"), "{message}");
}

// ---------------------------------------------------------------- finished

#[test]
fn the_common_reading_tells_success_from_failure_across_kinds() {
    let integrations = Integrations::builtin();
    let job = |api_version: &str, kind: &str, status: Value| json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "j"}, "status": status});
    let ended = |object: &Value| {
        let api_version = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        integrations
            .find(api_version, kind)
            .unwrap()
            .ended(object)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let cond = |t: &str, s: &str| json!({"conditions": [{"type": t, "status": s, "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]});
    assert_eq!(
        ended(&job("batch/v1", "Job", cond("Complete", "True"))),
        Some(Ended::Succeeded)
    );
    assert_eq!(
        ended(&job("batch/v1", "Job", cond("Failed", "True"))),
        Some(Ended::Failed {
            message: "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
        })
    );
    assert_eq!(
        ended(&job("batch/v1", "Job", cond("Complete", "False"))),
        None
    );
    assert_eq!(ended(&job("batch/v1", "Job", json!({}))), None);
    assert_eq!(
        ended(&json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})),
        None
    );
    assert_eq!(
        ended(&job(
            "kubeflow.org/v1",
            "PyTorchJob",
            cond("Succeeded", "True")
        )),
        Some(Ended::Succeeded)
    );
    // Tekton: Succeeded=False is a failure.
    assert!(matches!(
        ended(&job(
            "tekton.dev/v1",
            "PipelineRun",
            cond("Succeeded", "False")
        )),
        Some(Ended::Failed { .. })
    ));
    // Argo: the phase.
    assert_eq!(
        ended(&job(
            "argoproj.io/v1alpha1",
            "Workflow",
            json!({"phase": "Succeeded"})
        )),
        Some(Ended::Succeeded)
    );
    assert_eq!(
        ended(&job(
            "argoproj.io/v1alpha1",
            "Workflow",
            json!({"phase": "Error"})
        )),
        Some(Ended::Failed {
            message: "phase Error".into()
        })
    );
    assert_eq!(
        ended(&job(
            "argoproj.io/v1alpha1",
            "Workflow",
            json!({"phase": "Running"})
        )),
        None
    );
}

#[test]
fn a_user_defined_kind_says_itself_when_it_ended() {
    let (spec, warnings) = IntegrationSpec::from_manifest_yaml(
        r#"
apiVersion: arbiter.dev/v1alpha1
kind: JobIntegration
metadata: {name: sweeps}
spec:
  jobApiVersion: example.com/v1
  jobKind: Sweep
  podSets: "[{'name': 'main', 'count': 1, 'template': object.spec.template}]"
  hold: {path: spec.paused, held: true}
  finished:
    succeeded: "has(object.status.state) && object.status.state == 'Done'"
    failed: "has(object.status.state) && object.status.state == 'Crashed'"
    message: "'crashed in trial ' + string(object.status.trial)"
"#,
    )
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let integrations = Integrations::with_extra(vec![spec.clone()]).unwrap();
    let sweep = integrations.find("example.com/v1", "Sweep").unwrap();
    let object = |status: Value| json!({"apiVersion": "example.com/v1", "kind": "Sweep", "metadata": {"name": "s"}, "status": status});
    assert_eq!(
        sweep.ended(&object(json!({"state": "Running"}))).unwrap(),
        None
    );
    assert_eq!(
        sweep.ended(&object(json!({"state": "Done"}))).unwrap(),
        Some(Ended::Succeeded)
    );
    assert_eq!(
        sweep
            .ended(&object(json!({"state": "Crashed", "trial": 7})))
            .unwrap(),
        Some(Ended::Failed {
            message: "crashed in trial 7".into()
        })
    );
    // The common reading does not apply to it: a Complete condition says nothing.
    let complete = object(json!({"conditions": [{"type": "Complete", "status": "True"}]}));
    assert_eq!(sweep.ended(&complete).unwrap(), None);
    // An expression that fails on a job names the field and the job.
    let mut broken = spec.clone();
    broken.finished.as_mut().unwrap().failed = "object.status.state == 'Crashed'".into();
    let integrations = Integrations::with_extra(vec![broken]).unwrap();
    let error = integrations
        .find("example.com/v1", "Sweep")
        .unwrap()
        .ended(&object(json!({})))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.finished.failed") && error.contains("Sweep"),
        "{error}"
    );
    // And one that does not compile is refused at load, naming the field.
    let mut bad = spec;
    bad.finished.as_mut().unwrap().succeeded = "object.status.(".into();
    let error = Integrations::with_extra(vec![bad]).unwrap_err().to_string();
    assert!(error.contains("spec.finished.succeeded"), "{error}");
}

#[test]
fn pods_ready_is_read_as_kueue_reads_each_kind() {
    let integrations = Integrations::builtin();
    let ready = |api_version: &str, kind: &str, spec: Value, status: Value| {
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "j"}, "spec": spec, "status": status});
        integrations
            .find(api_version, kind)
            .unwrap()
            .pods_ready(&object)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let job = |status: Value| ready("batch/v1", "Job", json!({"parallelism": 3}), status);
    assert_eq!(job(json!({})), Some(false));
    assert_eq!(job(json!({"ready": 2})), Some(false));
    assert_eq!(job(json!({"ready": 2, "succeeded": 1})), Some(true));
    assert_eq!(
        ready(
            "batch/v1",
            "Job",
            json!({"parallelism": 3, "completions": 1}),
            json!({"ready": 1})
        ),
        Some(true)
    );
    let running = json!({"conditions": [{"type": "Running", "status": "True"}]});
    assert_eq!(
        ready("kubeflow.org/v1", "PyTorchJob", json!({}), running),
        Some(true)
    );
    assert_eq!(
        ready("kubeflow.org/v1", "PyTorchJob", json!({}), json!({})),
        Some(false)
    );
    // A kind that cannot say.
    assert_eq!(
        ready("argoproj.io/v1alpha1", "Workflow", json!({}), json!({})),
        None
    );
}

#[test]
fn progress_reads_a_version_as_ended_and_pods_ready_do() {
    let integrations = Integrations::builtin();
    let job = integrations.find("batch/v1", "Job").unwrap();
    let statuses = [
        json!({}),
        json!({"ready": 3}),
        json!({"ready": 1, "succeeded": 2}),
        json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 3}),
        json!({"conditions": [{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]}),
        // Numbers of every JSON kind: an int, one past i64, a float.
        json!({"ready": 18446744073709551615u64, "active": 1.5}),
    ];
    for status in statuses {
        let object = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 3}, "status": status});
        let progress = job.progress(&object);
        assert_eq!(
            progress.ended.map_err(|e| e.to_string()),
            job.ended(&object).map_err(|e| e.to_string()),
            "{status}"
        );
        assert_eq!(
            progress.pods_ready.map_err(|e| e.to_string()),
            job.pods_ready(&object).map_err(|e| e.to_string()),
            "{status}"
        );
    }
    let object = |status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 3}, "status": status});
    let running = job.progress(&object(json!({"ready": 3})));
    assert_eq!(running.ended.unwrap(), None);
    assert_eq!(running.pods_ready.unwrap(), Some(true));
    let done = job.progress(&object(
        json!({"conditions": [{"type": "Complete", "status": "True"}]}),
    ));
    assert_eq!(done.ended.unwrap(), Some(Ended::Succeeded));
}

#[test]
fn a_pod_templates_topology_annotations_are_carried_on_the_workload() {
    let info = extract(
        r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: tas, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        metadata:
          annotations: {kueue.x-k8s.io/podset-preferred-topology: cloud.com/topology-block}
        spec:
          containers: [{name: pytorch, image: x, resources: {requests: {cpu: 1}}}]
    Worker:
      replicas: 4
      template:
        metadata:
          annotations: {kueue.x-k8s.io/podset-required-topology: cloud.com/topology-rack}
        spec:
          containers: [{name: pytorch, image: x, resources: {requests: {cpu: 1}}}]
"#,
    );
    let topology = |name: &str| {
        info.pod_sets
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.topology.clone())
    };
    assert_eq!(
        topology("worker"),
        Some(TopologyRequest::Required("cloud.com/topology-rack".into()))
    );
    assert_eq!(
        topology("master"),
        Some(TopologyRequest::Preferred(
            "cloud.com/topology-block".into()
        ))
    );
    // The requests are the pod sets' own: the workload's annotations stay the job's.
    assert!(info.annotations.is_empty());
}

#[test]
fn a_workloads_pod_set_template_carries_its_topology_annotation() {
    let wl: Workload = serde_yaml_ng::from_str(
        r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: ml}
spec:
  queueName: lq
  podSets:
  - name: workers
    count: 2
    template:
      metadata:
        annotations: {kueue.x-k8s.io/podset-required-topology: cloud.com/topology-rack}
      spec:
        containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"#,
    )
    .unwrap();
    let info = job_info_from_workload(&wl).unwrap();
    assert_eq!(
        info.pod_sets[0].topology,
        Some(TopologyRequest::Required("cloud.com/topology-rack".into()))
    );
}
