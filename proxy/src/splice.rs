//! Zero-copy tunnel copy: `splice(2)` through a pipe per direction, driven by tokio's
//! readiness, so the bytes of a tunnel never cross into user space.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use tokio::io::{AsyncRead, AsyncWrite, Interest, Ready};
use tokio::net::{TcpStream, UnixStream};

use crate::sys;

/// A client connection the proxy can serve: a tokio TCP or Unix stream.
pub trait Stream: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static {
    /// Wait for readiness.
    fn ready_for(&self, i: Interest) -> impl Future<Output = io::Result<Ready>> + Send;
    /// Run a non-blocking operation, clearing readiness on `WouldBlock`.
    fn try_io_for<R>(&self, i: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

impl Stream for TcpStream {
    fn ready_for(&self, i: Interest) -> impl Future<Output = io::Result<Ready>> + Send {
        self.ready(i)
    }
    fn try_io_for<R>(&self, i: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.try_io(i, f)
    }
}

impl Stream for UnixStream {
    fn ready_for(&self, i: Interest) -> impl Future<Output = io::Result<Ready>> + Send {
        self.ready(i)
    }
    fn try_io_for<R>(&self, i: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.try_io(i, f)
    }
}

/// A non-blocking pipe.
#[derive(Debug)]
pub(crate) struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    cap: usize,
}

/// The pipe size asked for; `/proc/sys/fs/pipe-max-size` (1 MiB by default) caps it for an
/// unprivileged user, and past `pipe-user-pages-soft` the kernel refuses any growth: then the
/// pipe keeps the size it got, read back with `F_GETPIPE_SZ`.
const PIPE_SIZE: libc::c_int = 1 << 20;

impl Pipe {
    /// A non-blocking pipe (for tokio readiness).
    pub(crate) fn new() -> io::Result<Pipe> {
        let (r, w) = sys::pipe2(libc::O_NONBLOCK | libc::O_CLOEXEC)?;
        let cap = sys::set_pipe_size(&w, PIPE_SIZE).unwrap_or(4096);
        Ok(Pipe { r, w, cap })
    }
}

/// Below this, a chunk read from the source counts as small (see [`one_way`]).
const SMALL_CHUNK: usize = 64 << 10;

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    sys::splice(from, to, len, libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK)
}

async fn with_ready<S: Stream>(
    s: &S,
    i: Interest,
    mut f: impl FnMut() -> io::Result<usize>,
) -> io::Result<usize> {
    loop {
        s.ready_for(i).await?;
        match s.try_io_for(i, &mut f) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Copy `from` -> `to` until EOF (then shut `to` for writing). `account` sees every chunk
/// before it is passed on and may stop the copy (an error).
pub(crate) async fn one_way<A: Stream, B: Stream>(
    from: &A,
    to: &B,
    pipe: &Pipe,
    account: &(dyn Fn(usize) -> bool + Sync),
) -> io::Result<()> {
    loop {
        let n = with_ready(from, Interest::READABLE, || {
            splice(from.as_raw_fd(), pipe.w.as_raw_fd(), pipe.cap)
        })
        .await?;
        if n == 0 {
            sys::shutdown_write(to.as_raw_fd());
            return Ok(());
        }
        if !account(n) {
            return Err(io::Error::other("byte limit of the call"));
        }
        if n < SMALL_CHUNK {
            // A small chunk (a TLS record or two): give the CPU away once, so a producer on
            // this machine can fill the socket meanwhile and the next splice moves more.
            // Fewer, larger splices: on loopback a TLS download through the proxy took
            // about 8% less CPU per GiB and ran 5-15% faster (docs/benchmarks.md). Costs
            // one sched_yield(2), which returns at once when nothing else is runnable.
            std::thread::yield_now();
        }
        let mut left = n;
        while left > 0 {
            left -= with_ready(to, Interest::WRITABLE, || {
                splice(pipe.r.as_raw_fd(), to.as_raw_fd(), left)
            })
            .await?;
        }
    }
}

/// Both ways until both reached EOF, or either failed: each way's EOF shuts the other
/// side for writing (a half-close passed on). `account` sees every chunk of either way
/// before it is passed on, and stops the copy with an error when it says `false` (`&|_|
/// true` for none). Two pipes of up to 1 MiB each are made for it and closed at its end.
pub async fn both_ways<A: Stream, B: Stream>(
    a: &A,
    b: &B,
    account: &(dyn Fn(usize) -> bool + Sync),
) -> io::Result<()> {
    let (p1, p2) = (Pipe::new()?, Pipe::new()?);
    let up = one_way(a, b, &p1, account);
    let down = one_way(b, a, &p2, account);
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        tokio::select! {
            r = &mut up, if !up_done => { r?; up_done = true; }
            r = &mut down, if !down_done => { r?; down_done = true; }
        }
    }
    Ok(())
}
