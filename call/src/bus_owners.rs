//! Who owns which name on the real bus, for a bus filter's `talk` and `call` rules.
//!
//! xdg-dbus-proxy applies a rule to the connection that owns its name: a message to the
//! connection's unique name passes when any name it owns has a rule that lets it through.
//! So a `talk` rule to `org.freedesktop.Notifications` opens gnome-shell's whole connection,
//! which also serves `org.gnome.Shell` (`Eval`). Before the filter starts, a connection of
//! our own to the real bus reads the owners of the rules' names and of the never names
//! ([`efr_policy::bus::reaches_through`]): a rule whose connection also owns a never name it
//! would reach is cut (left out of the filter, said with why). The connection then watches
//! `NameOwnerChanged`: when a name changes hands so that a rule in the filter would reach
//! a never name (the never name's owner takes a rule's name, or the other way round), the
//! filter is cut (its proxy killed: the call's bus connections break, new ones are
//! refused), and the summary and `run` say why.
//!
//! It reads only the bus driver's `ListNames`, `GetNameOwner` and `NameOwnerChanged` (zbus,
//! on a tokio runtime of its own thread), and ends with the filter.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use efr_policy::bus::{ConnectionRule, reaches_through};
use efr_policy::config::Entry;

/// How long the first reading of the bus may take.
pub const FIRST_READ: Duration = Duration::from_secs(5);

/// Why the owners could not be read (the filter then does not start: its rules could not
/// be checked).
#[derive(Debug, thiserror::Error)]
pub enum OwnersError {
    /// Connecting to the bus, or asking its driver, failed.
    #[error("cannot read who owns the names of the bus {address}: {source}")]
    Bus {
        /// The bus's address.
        address: String,
        /// What zbus said.
        source: Box<zbus::Error>,
    },
    /// The thread or its runtime could not be started.
    #[error("cannot start the watch of the bus's names: {0}")]
    Start(std::io::Error),
    /// No answer in [`FIRST_READ`].
    #[error("the bus {0} did not list its names within {FIRST_READ:?}")]
    Timeout(String),
}

/// A rule left out of the filter, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutRule {
    /// The rule in words (`talk org.freedesktop.Notifications`).
    pub rule: String,
    /// The rule as xdg-dbus-proxy takes it (`--talk=...`).
    pub arg: String,
    /// The rule's bus name.
    pub name: String,
    /// Why: the other name its connection owns, and the never entry's reason.
    pub why: String,
}

impl CutRule {
    fn of(r: &ConnectionRule, why: String) -> CutRule {
        CutRule {
            rule: r.shown(),
            arg: r.arg(),
            name: r.name().to_string(),
            why,
        }
    }
}

/// What the watch knows, shared with the filter.
#[derive(Debug, Default)]
pub struct Seen {
    /// The rule that made the watch cut the filter during the call, once it did.
    pub cut: Option<CutRule>,
    /// Each unique name's well-known names (of those the watch reads), for the records.
    pub owned: BTreeMap<String, BTreeSet<String>>,
}

/// The watch of one filter's bus; ends when dropped.
#[derive(Debug)]
pub struct Owners {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// The proxy's pid once it runs (0 before): what a cut kills.
    pub proxy_pid: Arc<AtomicI32>,
    /// What the watch knows.
    pub seen: Arc<Mutex<Seen>>,
}

impl Owners {
    /// Ends the watch (and waits for its thread).
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The rule for which the filter was cut during the call, if it was.
    pub fn cut(&self) -> Option<CutRule> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cut
            .clone()
    }

    /// The well-known names the connection `unique` owns, as last seen.
    pub fn names_of(&self, unique: &str) -> Vec<String> {
        let s = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        s.owned
            .get(unique)
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for Owners {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The rules and never entries a watch decides by.
#[derive(Debug, Clone)]
struct Judge {
    rules: Vec<ConnectionRule>,
    never: Vec<Entry>,
}

impl Judge {
    /// Whether the watch needs to know who owns `name`.
    fn relevant(&self, name: &str) -> bool {
        !name.starts_with(':')
            && (self.rules.iter().any(|r| r.for_name(name))
                || self.never.iter().any(|e| {
                    let n = e.value.split('=').next().unwrap_or("");
                    name == n || (name.starts_with(n) && name[n.len()..].starts_with('.'))
                }))
    }

    /// The first reason `rule` reaches a never name through the connections that own its
    /// names, by `owned` (unique name to its names).
    fn reach(
        &self,
        rule: &ConnectionRule,
        owned: &BTreeMap<String, BTreeSet<String>>,
    ) -> Option<String> {
        for (unique, names) in owned {
            let Some(mine) = names.iter().find(|n| rule.for_name(n)) else {
                continue;
            };
            for other in names {
                if let Some(e) = reaches_through(rule, other, &self.never) {
                    return Some(format!(
                        "{mine}'s connection ({unique}) also owns {other}, which no bus filter \
                         opens ({}); the rule would reach it by the connection's unique name",
                        e.reason
                    ));
                }
            }
        }
        None
    }
}

/// Reads the owners on `address`, cuts the rules that reach a never name through their
/// connection, and watches the bus from then on; the rules cut, and the watch.
pub fn start(
    address: &str,
    rules: &[ConnectionRule],
    never: &[Entry],
) -> Result<(Vec<CutRule>, Owners), OwnersError> {
    let judge = Judge {
        rules: rules.to_vec(),
        never: never.to_vec(),
    };
    let (first_tx, first_rx) = std::sync::mpsc::channel::<Result<Vec<CutRule>, OwnersError>>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let proxy_pid = Arc::new(AtomicI32::new(0));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let addr = address.to_string();
    let (pid2, seen2) = (proxy_pid.clone(), seen.clone());
    let thread = std::thread::Builder::new()
        .name("bus-owners".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = first_tx.send(Err(OwnersError::Start(e)));
                    return;
                }
            };
            rt.block_on(watch(addr, judge, first_tx, stop_rx, pid2, seen2));
        })
        .map_err(OwnersError::Start)?;
    let mut owners = Owners {
        stop: Some(stop_tx),
        thread: Some(thread),
        proxy_pid,
        seen,
    };
    // The watch bounds its own first reading; this wait is the backstop of a thread that
    // does not even get that far, which is then left to end on its own (never joined: a
    // join could wait as long as the thread).
    match first_rx.recv_timeout(FIRST_READ + Duration::from_secs(1)) {
        Ok(Ok(cut)) => Ok((cut, owners)),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            if let Some(s) = owners.stop.take() {
                let _ = s.send(());
            }
            drop(owners.thread.take());
            Err(OwnersError::Timeout(address.to_string()))
        }
    }
}

/// The watch: the first reading (sent on `first`), then the changes until `stop`.
async fn watch(
    address: String,
    judge: Judge,
    first: std::sync::mpsc::Sender<Result<Vec<CutRule>, OwnersError>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    proxy_pid: Arc<AtomicI32>,
    seen: Arc<Mutex<Seen>>,
) {
    let bus_err = |source| OwnersError::Bus {
        address: address.clone(),
        source: Box::new(source),
    };
    let setup = async {
        let conn = zbus::connection::Builder::address(address.as_str())?
            .build()
            .await?;
        let driver = zbus::fdo::DBusProxy::new(&conn).await?;
        // Subscribed before the names are read: no change between the two is missed.
        let changes = driver.receive_name_owner_changed().await?;
        let mut owned: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for name in driver.list_names().await? {
            let name = name.to_string();
            if !judge.relevant(&name) {
                continue;
            }
            let Ok(bus_name) = zbus::names::BusName::try_from(name.as_str()) else {
                continue;
            };
            // A name may lose its owner between the list and the question: not an error.
            if let Ok(owner) = driver.get_name_owner(bus_name).await {
                owned.entry(owner.to_string()).or_default().insert(name);
            }
        }
        Ok::<_, zbus::Error>((conn, changes, owned))
    };
    // A bus that does not answer (a daemon whose policy drops our messages, one that hangs)
    // is an error in bounded time, never a call that waits for ever.
    let (_conn, mut changes, owned) = match tokio::time::timeout(FIRST_READ, setup).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            let _ = first.send(Err(bus_err(e)));
            return;
        }
        Err(_) => {
            let _ = first.send(Err(OwnersError::Timeout(address.clone())));
            return;
        }
    };
    let mut kept = Vec::new();
    let mut cut = Vec::new();
    for r in &judge.rules {
        match judge.reach(r, &owned) {
            Some(why) => cut.push(CutRule::of(r, why)),
            None => kept.push(r.clone()),
        }
    }
    seen.lock().unwrap_or_else(|e| e.into_inner()).owned = owned;
    if first.send(Ok(cut)).is_err() {
        return;
    }
    let judge = Judge {
        rules: kept,
        never: judge.never,
    };
    loop {
        let next = std::future::poll_fn(|cx| {
            futures_core::Stream::poll_next(std::pin::Pin::new(&mut changes), cx)
        });
        let signal = tokio::select! {
            _ = &mut stop => return,
            s = next => s,
        };
        let Some(signal) = signal else {
            // The bus went away: the proxy's upstream ends with it.
            return;
        };
        let Ok(args) = signal.args() else { continue };
        let name = args.name().to_string();
        if !judge.relevant(&name) {
            continue;
        }
        let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
        for names in s.owned.values_mut() {
            names.remove(&name);
        }
        s.owned.retain(|_, n| !n.is_empty());
        if let Some(new) = args.new_owner().as_ref() {
            s.owned.entry(new.to_string()).or_default().insert(name);
        }
        let cut = judge
            .rules
            .iter()
            .find_map(|r| judge.reach(r, &s.owned).map(|why| CutRule::of(r, why)));
        if let Some(c) = cut {
            s.cut = Some(c);
            drop(s);
            kill(&proxy_pid);
            return;
        }
    }
}

/// Kills the proxy whose pid is in `pid` (0: not started yet; the filter checks [`Seen::cut`]
/// once it has started it). The proxy is our child and is reaped only after the watch has
/// ended, so the pid cannot have been reused.
pub fn kill(pid: &AtomicI32) {
    let p = pid.load(Ordering::SeqCst);
    if p > 0 {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
