//! The fault proxy against the real API server: it forwards requests and
//! streams watches, answers the chosen requests with an injected status
//! (and counts them), holds everything while partitioned and lets it go
//! on when healed, and cuts open connections on demand.

use std::time::Duration;

use arbiter_testcluster::proxy::{Fault, Requests};
use arbiter_testcluster::TestCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": "default"}}))
        .unwrap()
}

/// How long a request is given to show that it is held (it must not have
/// completed) — a bound on a check, not a measurement.
const HELD: Duration = Duration::from_secs(2);
/// How long a request is given to complete once nothing holds it.
const PATIENCE: Duration = Duration::from_secs(60);

/// The watch's next event that is not a bookmark.
async fn next_event(
    watch: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
) -> Option<kube::Result<WatchEvent<ConfigMap>>> {
    loop {
        match tokio::time::timeout(PATIENCE, watch.next()).await.unwrap() {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            other => return other,
        }
    }
}

#[tokio::test]
async fn the_proxy_forwards_injects_partitions_and_cuts() {
    let cluster = TestCluster::start()
        .await
        .unwrap_or_else(|e| panic!("the test cluster did not start: {e}"));
    let proxy = cluster.fault_proxy().await.unwrap();
    // Without kube's own retries, so each request meets the proxy once.
    let mut config = proxy.config_for("admin").await.unwrap();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // Forwarded, the user's token passed through.
    namespaces.get("default").await.unwrap();
    maps.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    let forwarded = proxy.counts().forwarded;
    assert!(forwarded >= 2, "{:?}", proxy.counts());
    assert_eq!(proxy.counts().injected, 0);

    // A watch streams through the proxy.
    let mut watch = maps
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let first = next_event(&mut watch).await;
    assert!(matches!(first, Some(Ok(WatchEvent::Added(_)))), "{first:?}");

    // 429 on writes: reads still answered, writes refused as the API
    // would refuse them, counted.
    proxy.inject(Fault::Status {
        code: 429,
        requests: Requests::Writes,
    });
    namespaces.get("default").await.unwrap();
    let refused = maps.create(&PostParams::default(), &config_map("b")).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 429 && s.reason == "TooManyRequests"),
        "{refused:?}"
    );
    assert_eq!(proxy.counts().injected, 1);

    // 500 on everything.
    proxy.inject(Fault::Status {
        code: 500,
        requests: Requests::All,
    });
    let failed = namespaces.get("default").await;
    assert!(
        matches!(&failed, Err(kube::Error::Api(s)) if s.code == 500),
        "{failed:?}"
    );

    // Partitioned: a request neither fails nor completes, nor does the
    // open watch deliver; healed, both go on.
    proxy.inject(Fault::Partition);
    let create = tokio::spawn({
        let maps = maps.clone();
        async move { maps.create(&PostParams::default(), &config_map("c")).await }
    });
    tokio::time::sleep(HELD).await;
    assert!(
        !create.is_finished(),
        "a request went through the partition"
    );
    let direct: Api<ConfigMap> = Api::namespaced(cluster.admin_client().await.unwrap(), "default");
    assert!(direct.get_opt("c").await.unwrap().is_none());
    proxy.heal();
    tokio::time::timeout(PATIENCE, create)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let added = next_event(&mut watch).await;
    assert!(
        matches!(&added, Some(Ok(WatchEvent::Added(m))) if m.metadata.name.as_deref() == Some("c")),
        "{added:?}"
    );

    // Cut: the open watch ends; a new request opens a new connection.
    proxy.reset_connections();
    let ended = tokio::time::timeout(PATIENCE, async {
        loop {
            match watch.next().await {
                None | Some(Err(_)) => return,
                Some(Ok(_)) => continue,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch outlived the cut");
    namespaces.get("default").await.unwrap();
}
