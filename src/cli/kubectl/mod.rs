//! `kubectl arbiter …`: the `arbiter` binary installed (linked or copied)
//! as `kubectl-arbiter` on `PATH`, which kubectl runs for `kubectl arbiter`.
//! Lists workloads and queues with their state and position, describes a
//! workload with its typed reason and the policy that decided, says why
//! one waits, and stops and resumes queues (their `stopPolicy`), in
//! kubectl's conventions (`-n`, `-A`, `-o wide|yaml|json`).
//!
//! It reads what the caller's RBAC lets it read and says what it could not:
//! a tenant with `arbiter-queue-manager` in its namespace sees its
//! Workloads and LocalQueues (and positions in them); with
//! `arbiter-queue-viewer` also the ClusterQueues' quota. Positions come from
//! the queues' `pendingWorkloadsStatus`, which the operator writes in queue
//! order.

mod list;
mod queues;
mod why;

use std::path::PathBuf;

use anyhow::Context as _;
use arbiter_core::model::api::Workload;
use clap::{Args, Parser, Subcommand, ValueEnum};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

use super::UsageError;

pub use arbiter_operator::dashboard::model::{condition, State};

/// Queues and workloads of Arbiter, from kubectl.
#[derive(Parser, Debug)]
#[command(name = "kubectl arbiter", bin_name = "kubectl arbiter", version)]
pub struct KubectlCli {
    #[command(flatten)]
    pub target: Target,
    #[command(subcommand)]
    pub command: KubectlCommand,
}

/// Which cluster and namespace, as kubectl's flags name them.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster configuration).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace (default: the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum KubectlCommand {
    /// List workloads, LocalQueues or ClusterQueues.
    List(list::ListArgs),
    /// Show a workload: its job, queue, state, typed reason, the policy that decided, conditions and events.
    Describe(why::DescribeArgs),
    /// Say what keeps a workload waiting: quota by flavor, the workloads in front, preemption candidates, a policy.
    Why(why::WhyArgs),
    /// Stop a ClusterQueue or LocalQueue: admit nothing new (and evict what runs, unless --keep-already-running).
    Stop(queues::StopArgs),
    /// Resume a stopped ClusterQueue or LocalQueue.
    Resume(queues::ResumeArgs),
}

/// `-o`: kubectl's output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Wide,
    Yaml,
    Json,
}

/// Is this process `kubectl-arbiter` (run by kubectl as its plugin)?
pub fn invoked_as_plugin() -> bool {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .is_some_and(|name| name == "kubectl-arbiter")
}

pub fn run(cli: KubectlCli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let cluster = Cluster::connect(&cli.target).await?;
        match cli.command {
            KubectlCommand::List(args) => list::run(&cluster, &args).await,
            KubectlCommand::Describe(args) => why::describe(&cluster, &args).await,
            KubectlCommand::Why(args) => why::why(&cluster, &args).await,
            KubectlCommand::Stop(args) => queues::stop(&cluster, &args).await,
            KubectlCommand::Resume(args) => queues::resume(&cluster, &args).await,
        }
    })
}

/// The cluster the plugin talks to.
pub struct Cluster {
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// The API server's address, for messages.
    pub server: String,
}

impl Cluster {
    pub async fn connect(target: &Target) -> anyhow::Result<Cluster> {
        let options = KubeConfigOptions {
            context: target.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &target.kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .with_context(|| format!("using the kubeconfig {}", path.display()))?
            }
            None if target.context.is_some() => kube::Config::from_kubeconfig(&options)
                .await
                .context("using the context given with --context")?,
            None => kube::Config::infer().await.context(
                "finding the cluster: no usable kubeconfig ($KUBECONFIG, ~/.kube/config) and no in-cluster configuration; pass --kubeconfig",
            )?,
        };
        let namespace = target
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let server = config.cluster_url.to_string();
        let client = Client::try_from(config).context("making the API client")?;
        Ok(Cluster {
            client,
            namespace,
            server,
        })
    }

    /// A failed API call as a sentence: what was being done, what the
    /// server said, and what to do about it.
    pub fn explain(&self, err: kube::Error, doing: &str, kind: Kind) -> anyhow::Error {
        match err {
            kube::Error::Api(status) if status.code == 403 => anyhow::anyhow!(
                "{doing}: forbidden ({}); {}",
                status.message,
                kind.rbac_hint()
            ),
            kube::Error::Api(status)
                if status.code == 404 && status.message.contains(NOT_SERVED) =>
            {
                anyhow::anyhow!(
                    "{doing}: the server does not serve arbiter.dev/v1alpha1 {}: is Arbiter installed? (kubectl apply --server-side -k deploy/, or helm install arbiter deploy/helm/arbiter)",
                    kind.plural()
                )
            }
            kube::Error::Api(status) => anyhow::anyhow!(
                "{doing}: the API server answered {} {}: {}",
                status.code,
                status.reason,
                status.message
            ),
            other => anyhow::anyhow!(
                "{doing}: cannot reach the API server at {}: {other}",
                self.server
            ),
        }
    }
}

/// The kinds the plugin reads, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Workload,
    LocalQueue,
    ClusterQueue,
    Event,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Workload => "workloads",
            Kind::LocalQueue => "localqueues",
            Kind::ClusterQueue => "clusterqueues",
            Kind::Event => "events",
        }
    }

    fn rbac_hint(self) -> &'static str {
        match self {
            Kind::Workload | Kind::LocalQueue => {
                "a tenant needs the ClusterRole arbiter-queue-manager bound in its namespace (deploy/queue-manager.yaml); -A needs it in every namespace"
            }
            Kind::ClusterQueue => {
                "bind the ClusterRole arbiter-queue-viewer with a ClusterRoleBinding to read ClusterQueues (deploy/queue-manager.yaml); stopping one needs a platform role"
            }
            Kind::Event => "reading Events needs the namespace's view role",
        }
    }
}

/// Is the error the server refusing the caller (403)?
pub fn forbidden(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 403)
}

/// The API server's answer for a kind it does not serve (no CRD).
const NOT_SERVED: &str = "the server could not find the requested resource";

/// Is the error "no such object" (404 on a kind the server serves)?
pub fn not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404 && !status.message.contains(NOT_SERVED))
}

/// A usage error (exit 2): the arguments name something that cannot be.
pub fn usage(message: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(message))
}

/// The job a Workload belongs to: `Kind/name`, from its controller owner.
pub fn job_of(workload: &Workload) -> Option<(String, String)> {
    workload
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| workload.metadata.owner_references.as_ref()?.first())
        .map(|o| (o.kind.clone(), o.name.clone()))
}

/// kubectl's age: `45s`, `3m20s`, `17m`, `5h3m`, `30h`, `3d4h`, `12d`.
pub fn age(created: Option<&Time>, now: Timestamp) -> String {
    let Some(created) = created else {
        return "<unknown>".into();
    };
    let seconds = now.as_second().saturating_sub(created.0.as_second()).max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        format!("{minutes}m{}s", seconds % 60)
    } else if hours < 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        format!("{hours}h{}m", minutes % 60)
    } else if hours < 48 {
        format!("{hours}h")
    } else if days < 8 {
        format!("{days}d{}h", hours % 24)
    } else {
        format!("{days}d")
    }
}

/// Columns padded as kubectl pads them (three spaces apart), the header in
/// capitals; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i < last {
                let pad = widths[i].saturating_sub(cell.chars().count()) + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Objects printed as kubectl prints a list with `-o yaml` (or `-o json`).
pub fn print_list<T: serde::Serialize>(items: &[T], json: bool) -> anyhow::Result<()> {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let text = if json {
        serde_json::to_string_pretty(&list)? + "\n"
    } else {
        serde_yaml_ng::to_string(&list)?
    };
    super::print_stdout(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn ages_read_as_kubectl_writes_them() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (200, "3m20s"),
            (17 * 60, "17m"),
            (5 * 3600 + 180, "5h3m"),
            (30 * 3600, "30h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (12 * 86_400, "12d"),
        ];
        for (ago, want) in cases {
            assert_eq!(age(Some(&at(1_000_000 - ago)), now), want, "{ago}s ago");
        }
        assert_eq!(age(None, now), "<unknown>");
    }

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let text = table(
            &["NAME", "STATUS"],
            &[
                vec!["a".into(), "Pending".into()],
                vec!["longer-name".into(), "Admitted".into()],
            ],
        );
        assert_eq!(
            text,
            "NAME          STATUS\na             Pending\nlonger-name   Admitted\n"
        );
    }
}
