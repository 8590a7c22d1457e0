//! One forward's TCP relay: the host's listener, and for each connection it accepts a
//! socket of the job's namespace (from the socket maker) connected to the job's address,
//! the bytes moved both ways by `splice(2)` (`efr_proxy::splice`), half-closes passed on.
//! At most `max_conns` connections at once; the next is closed at once. Ending the
//! [`Relay`] closes the listener and every connection of it.

use std::net::SocketAddr;
use std::sync::Arc;

use efr_launcher::ns_sockets::{INET, INET6};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::{JoinHandle, JoinSet};

use super::helper::Helper;

/// A running relay; ended when dropped (its task aborted), or by [`Relay::end`], which
/// waits until every socket of it is closed.
#[derive(Debug)]
pub(crate) struct Relay {
    task: JoinHandle<()>,
    stop: Option<oneshot::Sender<()>>,
}

impl Relay {
    /// Serves `listener` (the host's) to `job` (the same address in the job's namespace).
    pub(crate) fn start(
        listener: TcpListener,
        job: SocketAddr,
        helper: Arc<Helper>,
        max_conns: usize,
    ) -> Relay {
        let (stop, stopped) = oneshot::channel();
        Relay {
            task: tokio::spawn(serve(listener, job, helper, max_conns, stopped)),
            stop: Some(stop),
        }
    }

    /// Ends it: returns once the listener and every connection of it are closed.
    pub(crate) async fn end(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    job: SocketAddr,
    helper: Arc<Helper>,
    max_conns: usize,
    mut stop: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(max_conns));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else {
                    // Out of fds and the like: the next accept may do.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    // Past the bound: closed at once.
                    drop(client);
                    continue;
                };
                let helper = helper.clone();
                conns.spawn(async move {
                    let _slot = slot;
                    let _ = one(client, job, &helper).await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    // Every connection aborted, and waited for: its sockets and pipes are closed on return.
    conns.shutdown().await;
}

/// Why one connection could not be relayed (it is closed; nothing is reported).
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error(transparent)]
    Helper(#[from] super::helper::HelperError),
    #[error("connect to {job} in the job's namespace: {source}")]
    Connect {
        job: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("relay to {job}: {source}")]
    Relay {
        job: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

async fn one(
    client: tokio::net::TcpStream,
    job: SocketAddr,
    helper: &Helper,
) -> Result<(), ConnError> {
    let fd = helper
        .socket(if job.is_ipv6() { INET6 } else { INET })
        .await?;
    let connect = |source| ConnError::Connect { job, source };
    let std = std::net::TcpStream::from(fd);
    std.set_nonblocking(true).map_err(connect)?;
    let upstream = TcpSocket::from_std_stream(std)
        .connect(job)
        .await
        .map_err(connect)?;
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    efr_proxy::splice::both_ways(&client, &upstream, &|_| true)
        .await
        .map_err(|source| ConnError::Relay { job, source })
}
