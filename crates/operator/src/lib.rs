//! `arbiter run`: the operator, the core's second driver. It reads the
//! queue configuration, Nodes and jobs through the Kubernetes API
//! (kube-runtime reflectors), feeds what happened to the same pure
//! scheduler the simulator drives, and carries out its decisions on the
//! jobs: admission injects each pod set's flavor node labels and
//! tolerations and releases the hold; eviction holds the job again and
//! restores its template. Policy bundles come from directories and
//! labelled ConfigMaps and change while it runs. The only async code of
//! the product.
//!
//! | module | owns |
//! |---|---|
//! | `admin` | the admin port: `/metrics` (`arbiter_*` families mirroring Kueue's, and the policy engine's), `/healthz`, `/readyz` |
//! | `watch` | reflectors (stores + wake-ups) over the configuration kinds, Namespaces, Nodes and each integration's job kind |
//! | `config` | API objects → `Cluster` (through `model::load`, as files are read; each object in force or left out on its own) and node pools from Nodes |
//! | `finalizers` | Kueue's deletion in use: the `arbiter.dev/resource-in-use` finalizer on every ClusterQueue and ResourceFlavor, taken off a deleted one once it is free |
//! | `activity` | which queue objects are in force: `Inactive`/`Active` Events on the objects, the `Active` condition with its transition time |
//! | `domain` | topology-aware placement carried out: the domain the core placed a pod set in, as the node selector `inject` adds |
//! | `inject` | the job transforms of admission and eviction, and the admission record a restart reads back |
//! | `seal` | the admission record's seal (HMAC with a key in a Secret of the operator's namespace), so a record read back is one Arbiter wrote for that job |
//! | `integrations` | user-defined job kinds: `JobIntegration` manifests from `--integrations` files, added to the built-in kinds |
//! | `jobs` | job reads (uid, creation time, template paths; whether it ended is its integration's) and the writes of one convergence step, each carrying the object's `resourceVersion` or a uid precondition, failures typed (`WriteError`) |
//! | `retry` | the one backoff of the operator's writes (`backon`) |
//! | `workloads` | the `Workload` object per queued job: spec, Kueue's status conditions with the typed reason; the Event recorder |
//! | `publish` | the writes that tell what was decided (Workloads, queue status, Events), on a task of their own, latest wish per object, concurrent, retried |
//! | `queue_status` | ClusterQueue and LocalQueue status: pending, admitted, quota in use per flavor (borrowed part), a usage line for `kubectl get`, the weighted share, the `Active` condition |
//! | `webhook` | the admission webhooks over TLS: the mutating hold of new queued jobs, the validating check of queue configuration objects, the serving certificate (mounted or generated, CA patched into the configurations) |
//! | `ungate` | pods of pod sets placed per card (gated at admission): each given its node and cards from the core's placement, then ungated |
//! | `leader` | leader election on a Lease (kube-lease-manager): only the holder runs the driver's loop |
//! | `provision` | the scale plan as cluster-autoscaler's ProvisioningRequests (one per scale-up, node-sized PodTemplates), withdrawn on scale-down; ended ones told back to the core |
//! | `policy_sources` | where policy bundles come from in the cluster: the `--policies` directories (watched) and the ConfigMaps labelled `arbiter.dev/policy-bundle` (platform ones in the operator's namespace, one tenant bundle per other namespace), built off the driver's task, told in Events, a status annotation and metrics |
//! | `multicluster` | multi-cluster dispatch (MultiKueue's model): admitted jobs managedBy `kueue.x-k8s.io/multikueue` (batch/v1 Job, the Kubeflow v1 kinds) copied to a worker cluster chosen by the placement policies, their status copied back, moved when a worker is lost, never two copies kept |
//! | `operator` | the operator put together: `Operator::builder` wires the driver, the bundle watches, the admin port, the dashboard, the webhooks and leader election; `arbiter run` and the tests start it so |
//! | `shadow` | shadow mode beside Kueue: Kueue's queue objects as the configuration, its jobs as arrivals, the core deciding without acting; each workload compared with Kueue's `Workload` (sooner, later, never, flavor, victims) in metrics, `/shadow` and a report file; writes nothing to the API |
//! | `driver` | the loop: configuration, job changes → `Input`s, `Scheduler::step`, each job's want set; the level-triggered writer (kube-runtime's `applier`) brings the jobs there |

pub mod activity;
pub mod admin;
pub mod config;
pub mod dashboard;
pub mod domain;
pub mod driver;
pub mod finalizers;
pub mod inject;
pub mod integrations;
pub mod jobs;
pub mod leader;
pub mod multicluster;
pub mod operator;
pub mod policy_sources;
pub mod provision;
pub mod publish;
pub mod queue_status;
pub mod retry;
pub mod seal;
pub mod shadow;
pub mod ungate;
pub mod watch;
pub mod webhook;
pub mod workloads;

pub use driver::{Driver, DriverOptions};
pub use operator::{Operator, OperatorBuilder, StartError};
