//! A TCP forwarder in front of a server the API server calls (an
//! admission webhook), for tests of what happens when that server is slow
//! or unreachable. It passes bytes through untouched (TLS included), so
//! the API server sees the server's own certificate; what it can change is
//! when bytes arrive ([`Reach::Delay`]) and whether a connection is kept
//! at all ([`Reach::Down`]).
//!
//! ```no_run
//! # async fn demo(webhook: std::net::SocketAddr) -> Result<(), arbiter_testcluster::Error> {
//! use arbiter_testcluster::tcp::{Reach, TcpProxy};
//! let proxy = TcpProxy::start(webhook).await?;
//! // … point the webhook configuration at `proxy.address` …
//! proxy.set(Reach::Down); // every connection closed, new ones dropped
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{io, Error};

/// How the forwarder treats connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Bytes pass through as they come.
    Forward,
    /// Every read from the caller waits this long before it is passed on,
    /// so each request (and each TLS handshake) arrives that much later.
    Delay(Duration),
    /// Open connections are closed and new ones closed on accept: the
    /// server is unreachable.
    Down,
}

/// A running forwarder; stops (its connections with it) when dropped.
pub struct TcpProxy {
    /// Where callers connect: `127.0.0.1:PORT`.
    pub address: SocketAddr,
    reach: watch::Sender<Reach>,
    accepted: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Result<TcpProxy, Error> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(io("binding the TCP proxy"))?;
        let address = listener
            .local_addr()
            .map_err(io("reading the TCP proxy's address"))?;
        let (reach, _) = watch::channel(Reach::Forward);
        let accepted = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            reach.clone(),
            accepted.clone(),
        ));
        Ok(TcpProxy {
            address,
            reach,
            accepted,
            accept,
        })
    }

    /// From now on, treats connections as `reach` says.
    pub fn set(&self, reach: Reach) {
        self.reach.send_replace(reach);
    }

    /// Connections accepted so far (forwarded or not), so a test can tell
    /// the caller tried.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reach.send_replace(Reach::Down);
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    reach: watch::Sender<Reach>,
    accepted: Arc<AtomicU64>,
) {
    loop {
        let Ok((caller, _)) = listener.accept().await else {
            continue;
        };
        accepted.fetch_add(1, Ordering::Relaxed);
        if *reach.borrow() == Reach::Down {
            drop(caller);
            continue;
        }
        tokio::spawn(forward(caller, upstream, reach.subscribe()));
    }
}

/// Copies both ways until either side closes or the proxy goes down.
async fn forward(caller: TcpStream, upstream: SocketAddr, mut reach: watch::Receiver<Reach>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut caller_read, mut caller_write) = caller.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let delays = reach.clone();
    let to_server = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match caller_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let delay = match *delays.borrow() {
                Reach::Delay(delay) => Some(delay),
                _ => None,
            };
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            if server_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let to_caller = async move {
        let _ = tokio::io::copy(&mut server_read, &mut caller_write).await;
        let _ = caller_write.shutdown().await;
    };
    let down = async move {
        let _ = reach.wait_for(|r| *r == Reach::Down).await;
    };
    tokio::select! {
        _ = async { tokio::join!(to_server, to_caller) } => {}
        _ = down => {}
    }
}
