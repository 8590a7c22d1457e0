//! Whether a peer of the service's socket is a contained call: the second lock behind the
//! masks (a call never sees the socket; if it reached it all the same, through a grant or
//! a path no mask names, it gets nothing but `hello`). A contained call runs in a pid
//! namespace of its own, made below the service's: the kernel's pid of the peer
//! (`SO_PEERPIDFD`, so that the answer is about the process that connected, not one that
//! took its pid since) has more than one level in its `NSpid`. A job's processes are also
//! in the job's cgroup below the service's (`efr-sandbox-<pid>/<name>`).

use std::os::fd::{AsFd, AsRawFd};

/// Why the peer is taken for a contained call, or `None` when it is not one.
pub fn contained(sock: &impl AsFd, pid: Option<i32>) -> Option<String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
    // The process behind a pidfd: its fdinfo's `Pid` (-1 once it has ended) and `NSpid`.
    let status = match getsockopt(sock, PeerPidfd) {
        Ok(pidfd) => read_fdinfo(pidfd.as_raw_fd()),
        // A kernel before 6.5: the pid SO_PEERCRED gave, read as it is now.
        Err(_) => pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok()),
    };
    let Some(status) = status else {
        return Some(ENDED.into());
    };
    judge(&status, &|p| {
        std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok()
    })
}

/// What is said of a peer whose process has ended by the time it is judged: whoever holds
/// its socket now (a child it forked, in a call's pid namespace or not) cannot be told.
const ENDED: &str = "the process that connected has ended: who holds its socket now cannot be told";

fn read_fdinfo(fd: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()
}

/// The verdict on a peer whose `/proc` status (or pidfd fdinfo) is `status`; `cgroup`
/// reads the cgroup file of a pid.
fn judge(status: &str, cgroup: &dyn Fn(i32) -> Option<String>) -> Option<String> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
    };
    let pid: Option<i32> = field("Pid:").and_then(|v| v.first()?.parse().ok());
    if pid.is_some_and(|p| p <= 0) {
        return Some(ENDED.into());
    }
    if let Some(levels) = field("NSpid:") {
        if levels.len() > 1 {
            return Some(format!(
                "the peer (pid {}) runs in a pid namespace below the service's: a contained \
                 call of the sandbox, which may ask the service for nothing but hello",
                pid.map_or_else(|| "?".into(), |p| p.to_string())
            ));
        }
    }
    let pid = pid.filter(|p| *p > 0)?;
    let ours = format!("/efr-sandbox-{}/", std::process::id());
    let text = cgroup(pid)?;
    text.lines().any(|l| l.contains(&ours)).then(|| {
        format!("the peer (pid {pid}) is in a job's cgroup of this service: a contained call")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_pid_namespace_or_a_jobs_cgroup_is_a_contained_call() {
        let none = |_| None;
        assert!(judge("Name:\tx\nPid:\t42\nNSpid:\t42\n", &none).is_none());
        let why = judge("Pid:\t42\nNSpid:\t42\t7\n", &none).unwrap();
        assert!(
            why.contains("pid 42") && why.contains("pid namespace"),
            "{why}"
        );
        let me = std::process::id();
        let job = move |_| Some(format!("0::/user.slice/efr-sandbox-{me}/j1\n"));
        assert!(
            judge("Pid:\t42\nNSpid:\t42\n", &job)
                .unwrap()
                .contains("cgroup")
        );
        // The service's own leaf (`efr-sandbox-<pid>.service`) is no job's.
        let svc = move |_| Some(format!("0::/user.slice/efr-sandbox-{me}.service\n"));
        assert!(judge("Pid:\t42\nNSpid:\t42\n", &svc).is_none());
        // An ended peer (`Pid: -1`): a child it forked may hold the socket now.
        assert!(
            judge("Pid:\t-1\nNSpid:\t-1\n", &none)
                .unwrap()
                .contains("ended")
        );
    }

    /// This process's own end of a socket pair: not contained.
    #[test]
    fn this_process_is_not_contained() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(contained(&a, Some(std::process::id() as i32)), None);
    }
}
