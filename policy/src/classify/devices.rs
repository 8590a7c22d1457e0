//! Devices a program opens without naming them on its line: `qemu-system-x86_64 -enable-kvm`
//! needs `/dev/kvm` (`[[device_use]]` of commands.toml). Each is a `device` exit with the
//! device grant; a device named as an argument (`screen /dev/ttyUSB0`) is found by the walker.

use efr_sandbox_wire::TargetOp;

use super::walk::{Arg, Cmd, Env, Walker};
use super::words::opt_values;

impl Walker<'_> {
    pub(super) fn device_use(&mut self, name: &str, rest: &[Arg], env: &Env, cmd: &Cmd) {
        let k = self.k;
        let named = |d: &crate::knowledge::DeviceUse| {
            d.names.iter().any(|n| n == name)
                || d.name_prefixes.iter().any(|p| name.starts_with(p.as_str()))
        };
        if !k.file.device_use.iter().any(named) {
            return;
        }
        let words: Vec<&str> = rest.iter().map(|a| a.text.as_str()).collect();
        for d in k.file.device_use.iter().filter(|d| named(d)) {
            let always = d.when_opts.is_empty() && d.value_opts.is_empty();
            let by_opt = words.iter().any(|w| d.when_opts.iter().any(|o| o == w));
            let by_value = !d.value_has.is_empty()
                && opt_values(&words, &d.value_opts)
                    .iter()
                    .any(|v| v.split([',', '=', ':']).any(|p| p == d.value_has));
            if always || by_opt || by_value {
                let from = self.findings.len();
                for dev in &d.devices {
                    self.touch(&Arg::lit(dev), TargetOp::Read, env, cmd, false);
                }
                self.give_reason(from, &d.reason);
                return;
            }
        }
    }
}

impl Walker<'_> {
    /// The findings pushed since `from` get the knowledge's reason.
    pub(super) fn give_reason(&mut self, from: usize, why: &str) {
        for f in self.findings.iter_mut().skip(from) {
            if !f.reasons.iter().any(|r| r == why) {
                f.reasons.push(why.to_string());
            }
        }
    }
}
