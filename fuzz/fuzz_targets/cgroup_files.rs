//! Feeds arbitrary text to the readers of the cgroup files a job's cgroup is found and read
//! by (`efr_jobs::cgroup::parse`: mountinfo, `/proc/self/cgroup`, keyed files such as
//! `memory.events` and `cpu.stat`, `cgroup.procs`, a process's `stat`, a service's dir
//! name). None may panic; what they read back holds what the text held.

#![no_main]

use efr_jobs::cgroup::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse::mounts(text);
    for m in parse::memberships(text) {
        let _ = m.is_v2();
        let _ = m.has("memory");
    }
    let _ = parse::keyed(text, "oom_kill");
    let _ = parse::number(text);
    let _ = parse::words(text);
    for pid in parse::pids(text) {
        assert!(text.contains(&pid.to_string()));
    }
    let _ = parse::live_ppid(text);
    let _ = parse::owner_pid(text);
});
