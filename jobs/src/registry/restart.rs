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
    /// The jobs that had ended, oldest first (at most [`ENDED_RECORDED`]); absent in a
    /// record of an older service.
    #[serde(default)]
    ended: Vec<JobInfo>,
}

/// Ended jobs the record keeps for the next service (the newest).
pub const ENDED_RECORDED: usize = 50;

/// What an earlier service left: its jobs that ran when it ended (now ended, by its
/// restart) and those that had ended before (as they ended).
#[derive(Debug, Default)]
pub struct Earlier {
    /// Ran when the earlier service ended: stopped, `daemon_restart`.
    pub ended_now: Vec<JobInfo>,
    /// Had ended before, oldest first.
    pub ended_before: Vec<JobInfo>,
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
    earlier: std::sync::Mutex<Earlier>,
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
                Ok(_) => Earlier::default(),
                Err(e) => {
                    eprintln!(
                        "efr-sandbox: {} does not read as the running jobs, dropped: {e}",
                        path.display()
                    );
                    Earlier::default()
                }
            },
            Err(_) => Earlier::default(),
        };
        Record {
            path,
            earlier: std::sync::Mutex::new(earlier),
        }
    }

    /// The jobs an earlier service left, ended (once: later calls give none).
    pub fn earlier(&self) -> Earlier {
        std::mem::take(&mut *self.earlier.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Writes `running` and `ended` (oldest first; the last [`ENDED_RECORDED`] kept) as
    /// the record (by rename: a reader never sees half of it).
    pub fn write(&self, running: &[Running], ended: &[JobInfo]) -> Result<(), RecordError> {
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
            ended: ended[ended.len().saturating_sub(ENDED_RECORDED)..].to_vec(),
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

/// The jobs of an earlier service's record: those that ran, as ended by its restart (their
/// launchers still alive killed), and those that had ended.
fn ended(f: File) -> Earlier {
    let now = super::now_ms();
    let ended_now = f
        .jobs
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
        .collect();
    let mut ended_before = f.ended;
    ended_before.retain(|i| i.state != JobState::Running);
    let extra = ended_before.len().saturating_sub(ENDED_RECORDED);
    ended_before.drain(..extra);
    Earlier {
        ended_now,
        ended_before,
    }
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
        assert!(mine.earlier().ended_now.is_empty());
        let running = vec![Running {
            info: info("j3"),
            launcher_pid: 0,
        }];
        let mut done = info("j1");
        done.state = JobState::Stopped;
        done.stopped_by = Some(JobStopBy::DaemonStop);
        mine.write(&running, std::slice::from_ref(&done)).unwrap();
        // The same service reading its own record finds nothing of an earlier one.
        assert!(
            Record::open(dir.path(), &sock)
                .earlier()
                .ended_now
                .is_empty()
        );
        // Another socket's service has its own record.
        let other = Record::open(dir.path(), &dir.path().join("other.sock")).earlier();
        assert!(other.ended_now.is_empty() && other.ended_before.is_empty());
        // Another service's record (pid 1 is no efr-sandbox serve).
        let path = dir.path().join("jobs/sandbox.sock.json");
        let mut f: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        f["service_pid"] = 1.into();
        std::fs::write(&path, serde_json::to_vec(&f).unwrap()).unwrap();
        let next = Record::open(dir.path(), &sock);
        let Earlier {
            ended_now: earlier,
            ended_before,
        } = next.earlier();
        // The job that had ended is kept as it ended.
        assert_eq!(ended_before, vec![done]);
        assert_eq!(earlier.len(), 1);
        assert_eq!(earlier[0].id, "j3");
        assert_eq!(earlier[0].state, JobState::Stopped);
        assert_eq!(earlier[0].stopped_by, Some(JobStopBy::DaemonRestart));
        assert!(earlier[0].ended_at.is_some());
        let again = next.earlier();
        assert!(
            again.ended_now.is_empty() && again.ended_before.is_empty(),
            "given once"
        );
    }

    #[test]
    fn the_ended_jobs_recorded_are_bounded_to_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("sandbox.sock");
        let ended: Vec<JobInfo> = (1..=ENDED_RECORDED + 10)
            .map(|n| {
                let mut i = info(&format!("j{n}"));
                i.state = JobState::Exited;
                i
            })
            .collect();
        Record::open(dir.path(), &sock).write(&[], &ended).unwrap();
        let path = dir.path().join("jobs/sandbox.sock.json");
        let mut f: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        f["service_pid"] = 1.into();
        std::fs::write(&path, serde_json::to_vec(&f).unwrap()).unwrap();
        let e = Record::open(dir.path(), &sock).earlier();
        assert_eq!(e.ended_before.len(), ENDED_RECORDED);
        assert_eq!(e.ended_before[0].id, "j11");
        assert_eq!(
            e.ended_before.last().unwrap().id,
            format!("j{}", ENDED_RECORDED + 10)
        );
        // A record of an older service, without `ended`, still reads.
        std::fs::write(&path, br#"{"service_pid": 1, "jobs": []}"#).unwrap();
        let e = Record::open(dir.path(), &sock).earlier();
        assert!(e.ended_now.is_empty() && e.ended_before.is_empty());
    }

    #[test]
    fn a_broken_record_is_dropped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("jobs")).unwrap();
        std::fs::write(dir.path().join("jobs/sandbox.sock.json"), b"{not json").unwrap();
        let e = Record::open(dir.path(), &dir.path().join("sandbox.sock")).earlier();
        assert!(e.ended_now.is_empty() && e.ended_before.is_empty());
    }

    #[test]
    fn only_a_launcher_of_that_service_is_killed() {
        // This process is no efr-launch, and no service.
        assert!(!launcher_of(std::process::id(), 1));
        assert!(!launcher_of(0, 1));
        assert!(!serving(std::process::id()));
    }
}
