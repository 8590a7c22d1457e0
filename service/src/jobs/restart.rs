//! The running jobs, written down for the next service: a service that was killed or
//! restarted could not report its jobs' end, so the next one (it holds the same socket, so
//! the earlier one is gone) reads what was running and reports each job ended, stopped by
//! `daemon_restart`. Their launchers end with the service that started them
//! (`--caller-pid`); one still alive when the next service reads the record is killed,
//! and named in the job's `survivors`.
//!
//! The record is `<runtime dir>/jobs/<socket's name>.json` (0600, in a 0700 dir; one per
//! socket, whose lock says which service owns it), rewritten by rename at each start and
//! end of a job. A record whose service still runs is never taken as an earlier one's.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use efr_sandbox_wire::job::{JobInfo, JobState, JobStopBy};
use serde::{Deserialize, Serialize};

/// One running job as the record has it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Running {
    /// The job.
    pub info: JobInfo,
    /// Its launcher's pid.
    pub launcher_pid: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    /// The service that wrote it.
    service_pid: u32,
    jobs: Vec<Running>,
}

/// Why the record could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the running jobs to {}: {source}", path.display())]
pub struct RecordError {
    path: PathBuf,
    source: std::io::Error,
}

/// The record of this service's running jobs, and what an earlier one left.
#[derive(Debug)]
pub struct Record {
    path: PathBuf,
    earlier: std::sync::Mutex<Vec<JobInfo>>,
}

impl Record {
    /// Reads what an earlier service of the socket `socket` left in `runtime_dir` (a record
    /// that does not read is reported on stderr and dropped) and kills its jobs' launchers
    /// still alive.
    pub fn open(runtime_dir: &Path, socket: &Path) -> Record {
        let dir = runtime_dir.join("jobs");
        let name = socket
            .file_name()
            .map_or_else(|| "service".into(), |n| n.to_string_lossy().into_owned());
        let path = dir.join(format!("{name}.json"));
        let earlier = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                Ok(f) if f.service_pid != std::process::id() && !serving(f.service_pid) => ended(f),
                Ok(_) => Vec::new(),
                Err(e) => {
                    eprintln!(
                        "efr-sandbox: {} does not read as the running jobs, dropped: {e}",
                        path.display()
                    );
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        };
        Record {
            path,
            earlier: std::sync::Mutex::new(earlier),
        }
    }

    /// The jobs an earlier service left, ended (once: later calls give none).
    pub fn earlier(&self) -> Vec<JobInfo> {
        std::mem::take(&mut *self.earlier.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Writes `running` as the record (by rename: a reader never sees half of it).
    pub fn write(&self, running: &[Running]) -> Result<(), RecordError> {
        let err = |source| RecordError {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(err)?;
        }
        let file = File {
            service_pid: std::process::id(),
            jobs: running.to_vec(),
        };
        let json = serde_json::to_vec(&file).map_err(|e| err(std::io::Error::other(e)))?;
        let tmp = self.path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(err)?;
        f.write_all(&json).map_err(err)?;
        drop(f);
        std::fs::rename(&tmp, &self.path).map_err(err)
    }
}

/// The jobs of an earlier service's record, as ended by its restart; their launchers
/// still alive killed.
fn ended(f: File) -> Vec<JobInfo> {
    let now = super::now_ms();
    f.jobs
        .into_iter()
        .map(|r| {
            let mut info = r.info;
            if launcher_of(r.launcher_pid, f.service_pid) {
                // A pid checked just now to be a launcher of that service: a reuse in
                // between would need the pids to wrap within microseconds.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(r.launcher_pid).unwrap_or(0)),
                    nix::sys::signal::Signal::SIGKILL,
                );
                info.survivors.push(r.launcher_pid);
            }
            info.state = JobState::Stopped;
            info.stopped_by = Some(JobStopBy::DaemonRestart);
            info.ended_at = Some(now);
            info.forwards.clear();
            info
        })
        .collect()
}

/// Whether `pid` is a running `efr-sandbox serve` (the record is then that service's, not
/// an earlier one's).
fn serving(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
        args.first().is_some_and(|a| a.ends_with(b"efr-sandbox"))
            && args.get(1).is_some_and(|a| *a == b"serve")
    })
}

/// Whether `pid` is an `efr-launch` started by the service `service_pid`.
fn launcher_of(pid: u32, service_pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
    let is_launcher = args.first().is_some_and(|a| a.ends_with(b"efr-launch"));
    let caller = service_pid.to_string();
    is_launcher
        && args
            .windows(2)
            .any(|w| w[0] == b"--caller-pid" && w[1] == caller.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str) -> JobInfo {
        efr_sandbox_wire::job::JobInfo {
            id: id.into(),
            state: JobState::Running,
            ended_at: None,
            stopped_by: None,
            ..efr_sandbox_wire::fixtures::example_job()
        }
    }

    #[test]
    fn a_record_left_by_another_service_reads_as_ended_by_its_restart() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("sandbox.sock");
        let mine = Record::open(dir.path(), &sock);
        assert!(mine.earlier().is_empty());
        let running = vec![Running {
            info: info("j3"),
            launcher_pid: 0,
        }];
        mine.write(&running).unwrap();
        // The same service reading its own record finds nothing of an earlier one.
        assert!(Record::open(dir.path(), &sock).earlier().is_empty());
        // Another socket's service has its own record.
        assert!(
            Record::open(dir.path(), &dir.path().join("other.sock"))
                .earlier()
                .is_empty()
        );
        // Another service's record (pid 1 is no efr-sandbox serve).
        let path = dir.path().join("jobs/sandbox.sock.json");
        let mut f: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        f["service_pid"] = 1.into();
        std::fs::write(&path, serde_json::to_vec(&f).unwrap()).unwrap();
        let next = Record::open(dir.path(), &sock);
        let earlier = next.earlier();
        assert_eq!(earlier.len(), 1);
        assert_eq!(earlier[0].id, "j3");
        assert_eq!(earlier[0].state, JobState::Stopped);
        assert_eq!(earlier[0].stopped_by, Some(JobStopBy::DaemonRestart));
        assert!(earlier[0].ended_at.is_some());
        assert!(next.earlier().is_empty(), "given once");
    }

    #[test]
    fn a_broken_record_is_dropped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("jobs")).unwrap();
        std::fs::write(dir.path().join("jobs/sandbox.sock.json"), b"{not json").unwrap();
        assert!(
            Record::open(dir.path(), &dir.path().join("sandbox.sock"))
                .earlier()
                .is_empty()
        );
    }

    #[test]
    fn only_a_launcher_of_that_service_is_killed() {
        // This process is no efr-launch, and no service.
        assert!(!launcher_of(std::process::id(), 1));
        assert!(!launcher_of(0, 1));
        assert!(!serving(std::process::id()));
    }
}
