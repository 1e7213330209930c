//! `arbiter dashboard`: the operator's read-only web dashboard served
//! locally, reading the cluster through a kubeconfig (what its user may
//! read; what it may not is named on the page).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::kubectl::{Cluster, Target};

#[derive(Args, Debug)]
pub struct DashboardArgs {
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster configuration).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Where to serve the dashboard (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8090", value_name = "HOST:PORT")]
    pub address: SocketAddr,
}

pub fn run(args: &DashboardArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let target = Target {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            namespace: None,
        };
        let cluster = Cluster::connect(&target).await?;
        let listener = tokio::net::TcpListener::bind(args.address)
            .await
            .with_context(|| format!("binding {}; pass --address", args.address))?;
        let bound = listener.local_addr()?;
        // Tests and scripts read this line for the address.
        println!(
            "dashboard of {} at http://{bound}/dashboard/",
            cluster.server
        );
        arbiter_operator::dashboard::serve(listener, cluster.client, Default::default())
            .await
            .context("serving the dashboard")
    })
}
