//! [`Ports`]: which job holds which host address of a forward, shared by every job of the
//! service, so that a second job on a port learns who holds it (`in_use` with `by_job`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

/// A job that holds a host address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its conversation.
    pub conversation: String,
    /// Its job id.
    pub job_id: String,
}

/// The host addresses (`127.0.0.1:PORT`, `[::1]:PORT`) forwarded to jobs, and to which.
/// One for the whole service ([`super::start`] takes it in an `Arc`).
#[derive(Debug, Default)]
pub struct Ports {
    held: Mutex<HashMap<SocketAddr, Holder>>,
}

impl Ports {
    /// No address held.
    pub fn new() -> Ports {
        Ports::default()
    }

    /// Who holds `addr`, if a job does.
    pub fn holder(&self, addr: SocketAddr) -> Option<Holder> {
        self.lock().get(&addr).cloned()
    }

    /// Takes `addr` for `job`; the holder when another job has it (a job holds an address
    /// once: taking one's own again is no error).
    pub(crate) fn claim(&self, addr: SocketAddr, job: &Holder) -> Result<(), Holder> {
        let mut held = self.lock();
        match held.get(&addr) {
            Some(h) if h != job => Err(h.clone()),
            _ => {
                held.insert(addr, job.clone());
                Ok(())
            }
        }
    }

    /// Gives `addr` back, when `job` holds it.
    pub(crate) fn release(&self, addr: SocketAddr, job: &Holder) {
        let mut held = self.lock();
        if held.get(&addr) == Some(job) {
            held.remove(&addr);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Holder>> {
        // A panic while held leaves a map that is still whole (each change is one insert
        // or remove): go on with it.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_job_holds_an_address() {
        let p = Ports::new();
        let a: SocketAddr = "127.0.0.1:8000".parse().unwrap();
        let j1 = Holder {
            conversation: "c".into(),
            job_id: "1".into(),
        };
        let j2 = Holder {
            conversation: "c".into(),
            job_id: "2".into(),
        };
        assert_eq!(p.claim(a, &j1), Ok(()));
        assert_eq!(p.claim(a, &j1), Ok(()));
        assert_eq!(p.claim(a, &j2), Err(j1.clone()));
        // Another job cannot give it back; its holder can.
        p.release(a, &j2);
        assert_eq!(p.holder(a), Some(j1.clone()));
        p.release(a, &j1);
        assert_eq!(p.holder(a), None);
        assert_eq!(p.claim(a, &j2), Ok(()));
        // The same port on ::1 is another address.
        let b: SocketAddr = "[::1]:8000".parse().unwrap();
        assert_eq!(p.claim(b, &j1), Ok(()));
    }
}
