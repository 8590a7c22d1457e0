//! The egress proxy of a contained call (design section 7, issues 5 and 12): one [`Proxy`]
//! per contained call with its own network, grants or not, on a Unix socket in a 0700
//! directory of the call; its summary part merged into the call's `sandbox_summary`, each
//! refusal turned into a `host` (or `open_network`) exit record with source `denial` whose
//! grant is exactly what would open it. A call with no host grant still gets the DNS path
//! and the refusal path: a name it asks for is refused with a record, not a bare "could
//! not resolve host".

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use efr_launcher::plan::{MAX_SOCKET_PATH, NetMode, Plan, PlanMode, ProxyPlan};
use efr_policy::classify::Context;
use efr_policy::config::{Config, Env};
use efr_proxy::{HostRule, Proxy, ProxyPolicy, Refusal};
use efr_sandbox_wire::summary::BlockReason;
use efr_sandbox_wire::{
    Action, ExitKind, ExitRecord, ExitSource, Facts, Grant, HostFact, JudgedBy, Judgement, Needs,
    SandboxSummary, Verdict,
};
use tokio::sync::mpsc::Receiver;

use crate::launch::private_dir;

/// The file name of the proxy socket in the call's directory.
pub const SOCKET_NAME: &str = "proxy.sock";

/// Whether a plan gets a proxy: contained with its own network (grants or not: with none,
/// the proxy only refuses, and each refusal is an exit record naming the grant that would
/// open it). `net_view` and `open_network` calls use the host's network and get none.
pub fn wanted(plan: &Plan) -> bool {
    plan.mode == PlanMode::Contained && plan.net() == NetMode::Own
}

/// The policy of a call: its host grants, the config's allow, deny and resolve lists, and
/// the hosts a token visible to the call is for (denied): a token file no mask hides (the
/// call's `unmask` grants show one again), a variable of `call_env` (what the call's
/// environment keeps: [`call_env`]) or a credential helper the call can run.
pub fn policy(
    grants: &[Grant],
    config: &Config,
    env: &Env,
    projects: &[String],
    call_env: &[(String, String)],
) -> ProxyPolicy {
    let mut p = ProxyPolicy::from_grants(grants);
    p.allow = config
        .network
        .allow
        .iter()
        .filter_map(|e| HostRule::parse_cli(&e.value))
        .collect();
    for d in &config.network.deny {
        p.deny(&d.value);
    }
    for r in &config.network.resolve {
        let mut addrs = p.resolve.get(&r.name).cloned().unwrap_or_default();
        addrs.push(r.address);
        p.map(&r.name, addrs);
    }
    let ctx = Context::new(config, env);
    let roots: Vec<PathBuf> = projects.iter().map(PathBuf::from).collect();
    let unmasked: Vec<PathBuf> = grants
        .iter()
        .filter_map(|g| match g {
            Grant::Unmask { path } => Some(PathBuf::from(path)),
            _ => None,
        })
        .collect();
    for h in efr_policy::classify::tokens::visible_token_hosts(&ctx, &roots, &unmasked, call_env) {
        p.token_host(&h);
    }
    p
}

/// The variables a plan's line starts with, as the launcher scrubs them (the same code).
pub fn call_env(plan: &Plan) -> Vec<(String, String)> {
    let inherited = efr_launcher::env::source(plan);
    efr_launcher::env::scrub(plan, &inherited)
        .into_iter()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// The proxy of one call, serving until [`CallProxy::stop`] (or drop).
#[derive(Debug)]
pub struct CallProxy {
    proxy: Proxy,
    dir: PathBuf,
    events: Mutex<Option<Receiver<Refusal>>>,
    ids: Mutex<HashMap<(String, u16, BlockReason), usize>>,
    stopped: bool,
}

impl CallProxy {
    /// Starts the proxy of `plan` (when [`wanted`]) on a socket in a new 0700 directory
    /// below `runtime` (`calls/<random>`; under the temp dir when that path would be too
    /// long for a socket), served on `handle`, and fills the plan's `proxy` member.
    pub fn attach(
        plan: &mut Plan,
        policy: ProxyPolicy,
        runtime: Option<&Path>,
        handle: &tokio::runtime::Handle,
    ) -> Result<CallProxy, String> {
        let name = crate::sys::random_hex(8)
            .map_err(|e| format!("no random name for the proxy socket: {e}"))?;
        let uid = crate::sys::euid();
        let mut dir = match runtime {
            Some(r) => r.join("calls").join(&name),
            None => std::env::temp_dir().join(format!("efr-sandbox-{uid}/calls/{name}")),
        };
        if dir.join(SOCKET_NAME).as_os_str().len() > MAX_SOCKET_PATH {
            dir = std::env::temp_dir().join(format!("efr-sandbox-{uid}/calls/{name}"));
        }
        if let Some(parent) = dir.parent() {
            private_dir(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            // A directory of the shared temp dir must be ours (not one planted there).
            for d in [parent, parent.parent().unwrap_or(parent)] {
                use std::os::unix::fs::MetadataExt;
                match std::fs::symlink_metadata(d) {
                    Ok(m) if m.is_dir() && m.uid() == uid => {}
                    _ => return Err(format!("{}: not a directory of ours", d.display())),
                }
            }
        }
        private_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let sock = dir.join(SOCKET_NAME);
        let mut ports: Vec<u16> = policy
            .grants
            .iter()
            .chain(&policy.allow)
            .filter_map(|r| r.port)
            .filter(|p| !matches!(p, 53 | 443) && *p != efr_launcher::plan::DEFAULT_RELAY_PORT)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports.truncate(64);
        let proxy = Proxy::new(policy);
        let listener = {
            let _g = handle.enter();
            Proxy::bind_unix(&sock)
        };
        let listener = match listener {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("proxy socket {}: {e}", sock.display()));
            }
        };
        let events = proxy.subscribe(1024);
        let p = proxy.clone();
        handle.spawn(async move { p.serve_unix(listener).await });
        let mut pp = ProxyPlan::new(sock.to_string_lossy().into_owned());
        pp.ports = ports;
        plan.proxy = Some(pp);
        Ok(CallProxy {
            proxy,
            dir,
            events: Mutex::new(Some(events)),
            ids: Mutex::new(HashMap::new()),
            stopped: false,
        })
    }

    /// The refusal events (once; `sandbox.launch` sends them as they happen).
    pub fn take_events(&self) -> Option<Receiver<Refusal>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The exit record of a refusal not seen before (`None` for one already recorded).
    pub fn record_new(&self, r: &Refusal, line: &str) -> Option<ExitRecord> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let key = (r.host.clone(), r.port, r.reason);
        if ids.contains_key(&key) {
            return None;
        }
        let n = ids.len() + 1;
        ids.insert(key, n);
        Some(host_record(n, r, line, self.proxy.policy()))
    }

    /// TESTS ONLY (the check's `proxy_down`): the proxy stops serving, its socket file stays,
    /// so a connection to it (the init's hand-over) is refused.
    pub fn stop_serving(&self) {
        self.proxy.shutdown();
    }

    /// Ends the proxy (listener and tunnels) and removes its directory.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.proxy.shutdown();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Stops the proxy, merges its part of the summary, and gives the exit records of every
    /// refusal not recorded yet (one per host, port and reason).
    pub fn finish(&mut self, summary: &mut SandboxSummary, line: &str) -> Vec<ExitRecord> {
        self.stop();
        let s = self.proxy.summary();
        summary.proxied = s.proxied;
        summary.blocked = s.blocked;
        summary.blocked_more = s.blocked_more;
        self.proxy
            .refusals_all()
            .into_iter()
            .filter_map(|r| self.record_new(&r, line))
            .collect()
    }
}

impl Drop for CallProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The exit record of one proxy refusal: kind `host` (`open_network` for an IP literal),
/// source `denial`.
pub fn host_record(n: usize, r: &Refusal, line: &str, policy: &ProxyPolicy) -> ExitRecord {
    let hp = format!("{}:{}", r.host, r.port);
    let port = (r.port != 443).then_some(r.port);
    let token = policy
        .token_hosts
        .iter()
        .any(|p| efr_proxy::name::matches(p, &r.host));
    let review = |grants: Vec<Grant>, why: String| {
        (
            Needs::Contained { grants },
            Judgement {
                verdict: Verdict::Review,
                by: JudgedBy::Policy,
                reasons: vec![why],
            },
        )
    };
    let refuse = |verdict: Verdict, why: String| {
        (
            Needs::Nothing,
            Judgement {
                verdict,
                by: JudgedBy::Policy,
                reasons: vec![why],
            },
        )
    };
    let (kind, (needs, judgement)) = match r.reason {
        BlockReason::IpLiteral => (
            ExitKind::OpenNetwork,
            review(
                vec![Grant::OpenNetwork],
                format!(
                    "the proxy refused {hp}: an IP address, which no host grant names; only \
                     open_network reaches it"
                ),
            ),
        ),
        BlockReason::NotAllowed => (
            ExitKind::Host,
            review(
                vec![Grant::Host {
                    host: r.host.clone(),
                    port,
                    plain_http: false,
                }],
                format!("the proxy refused {hp}: no grant names it; a host grant opens it"),
            ),
        ),
        BlockReason::NotTls => (
            ExitKind::Host,
            review(
                vec![Grant::Host {
                    host: r.host.clone(),
                    port,
                    plain_http: true,
                }],
                format!(
                    "the proxy refused {hp}: not TLS; a host grant with plain HTTP lets plain \
                     HTTP requests through (a tunnel must still carry TLS)"
                ),
            ),
        ),
        BlockReason::Denied if token => (
            ExitKind::Host,
            refuse(
                Verdict::UserOnly,
                format!(
                    "the proxy refused {hp}: a token host (a token for it is visible to the \
                     call: a file it can read, a variable it keeps or a credential helper it \
                     can run); no host grant opens it, only you can let a call reach it"
                ),
            ),
        ),
        BlockReason::Denied => (
            ExitKind::Host,
            refuse(
                Verdict::Refuse,
                match &r.special {
                    Some(sp) => format!(
                        "the proxy refused {hp}: {}; no host grant opens it",
                        sp.explain(&r.host)
                    ),
                    None => format!(
                        "the proxy refused {hp}: on the config's deny list; no host grant \
                         opens it"
                    ),
                },
            ),
        ),
        BlockReason::BadRequest => (
            ExitKind::Host,
            refuse(
                Verdict::Refuse,
                format!(
                    "the proxy refused {hp}: a malformed request, or a TLS name (SNI) other \
                     than the host asked for"
                ),
            ),
        ),
        _ => (
            ExitKind::Host,
            refuse(
                Verdict::Refuse,
                format!("the proxy refused {hp}: over the call's connection or byte limits"),
            ),
        ),
    };
    ExitRecord {
        id: format!("host-{n}"),
        source: ExitSource::Denial,
        kind,
        summary: format!("reach {hp} (refused by the proxy: {})", r.reason.as_str()),
        action: Action {
            line: line.to_string(),
            ..Default::default()
        },
        facts: Facts {
            hosts: vec![HostFact {
                host: r.host.clone(),
                port: Some(r.port),
                project_remote: false,
            }],
            ..Default::default()
        },
        needs,
        judgement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use efr_policy::classify::{ClassifyRequest, classify};
    use efr_proxy::{Decision, Kind};
    use efr_sandbox_wire::{Launch, Mode};

    fn write(p: &Path, text: &str) {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }

    /// The grants the classifier proposes for `line` (the launch it answers).
    fn proposed(config: &Config, env: &Env, proj: &Path, line: &str) -> Vec<Grant> {
        let ctx = Context::new(config, env);
        let mut req = ClassifyRequest::new(line, Some(proj.to_path_buf()), Mode::Cautious);
        req.project_roots = vec![proj.to_path_buf()];
        match classify(&req, &ctx).launch {
            Launch::Contained { grants } => grants,
            other => panic!("{line}: launched {other:?}"),
        }
    }

    /// Each tool's line, granted exactly what the classifier proposed, gets through the
    /// call's proxy to every host the tool contacts (its registry's index and its files).
    #[test]
    fn the_proposal_granted_as_is_admits_every_host_the_tool_contacts() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = home.join("src/app");
        std::fs::create_dir_all(&proj).unwrap_or_else(|e| panic!("{e}"));
        let env = Env::new(&home);
        let config = Config::defaults();
        // A user logged in to npm and cargo: their token files are masked, so the
        // registries stay open to a grant.
        write(
            &home.join(".npmrc"),
            "//registry.npmjs.org/:_authToken=npm_secret\n",
        );
        write(
            &home.join(".cargo/credentials.toml"),
            "[registry]\ntoken = \"cio\"\n",
        );
        write(
            &proj.join("Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\n[dependencies]\nitoa = \"1\"\n",
        );
        let cases: &[(&str, &[&str])] = &[
            ("cargo fetch", &["index.crates.io", "static.crates.io"]),
            // No Cargo.lock and a registry dependency: the build resolves and downloads.
            ("cargo build", &["index.crates.io", "static.crates.io"]),
            (
                "cargo test --release",
                &["index.crates.io", "static.crates.io"],
            ),
            (
                "pip install requests",
                &["pypi.org", "files.pythonhosted.org"],
            ),
            ("uv sync", &["pypi.org", "files.pythonhosted.org"]),
            ("poetry install", &["pypi.org", "files.pythonhosted.org"]),
            (
                "pipx install black",
                &["pypi.org", "files.pythonhosted.org"],
            ),
            (
                "python3 -m pip install -r requirements.txt",
                &["pypi.org", "files.pythonhosted.org"],
            ),
            ("npm ci", &["registry.npmjs.org"]),
            ("pnpm install", &["registry.npmjs.org"]),
            ("yarn", &["registry.yarnpkg.com", "registry.npmjs.org"]),
            ("bun install", &["registry.npmjs.org"]),
            ("go mod download", &["proxy.golang.org", "sum.golang.org"]),
            ("bundle install", &["rubygems.org", "index.rubygems.org"]),
            (
                "composer install",
                &[
                    "repo.packagist.org",
                    "api.github.com",
                    "codeload.github.com",
                ],
            ),
            ("mvn package", &["repo.maven.apache.org"]),
            (
                "./gradlew build",
                &[
                    "services.gradle.org",
                    "downloads.gradle.org",
                    "plugins.gradle.org",
                    "repo.maven.apache.org",
                ],
            ),
        ];
        for (line, hosts) in cases {
            let grants = proposed(&config, &env, &proj, line);
            let projects = vec![proj.to_string_lossy().into_owned()];
            let pol = policy(&grants, &config, &env, &projects, &[]);
            for h in *hosts {
                assert!(
                    matches!(pol.decide(Kind::Connect, h, 443), Decision::Allow { .. }),
                    "{line}: the proxy refuses {h} with the proposed grants {grants:?}"
                );
            }
        }
        // The user's own registries: a project .npmrc and a pip.conf with an extra index
        // on plain http.
        write(
            &proj.join(".npmrc"),
            "registry=https://npm.corp.example:4873/\n@x:registry=https://x.corp.example/\n",
        );
        write(
            &home.join(".config/pip/pip.conf"),
            "[global]\nindex-url = https://pypi.corp.example/simple\nextra-index-url = http://extra.corp.example:8080/simple\n",
        );
        let projects = vec![proj.to_string_lossy().into_owned()];
        let grants = proposed(&config, &env, &proj, "npm install");
        let pol = policy(&grants, &config, &env, &projects, &[]);
        assert!(matches!(
            pol.decide(Kind::Connect, "npm.corp.example", 4873),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            pol.decide(Kind::Connect, "x.corp.example", 443),
            Decision::Allow { .. }
        ));
        let grants = proposed(&config, &env, &proj, "pip install flask");
        let pol = policy(&grants, &config, &env, &projects, &[]);
        assert!(matches!(
            pol.decide(Kind::Connect, "pypi.corp.example", 443),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            pol.decide(Kind::PlainHttp, "extra.corp.example", 8080),
            Decision::Allow { .. }
        ));
    }

    /// A visible token denies its host whatever the grants; a masked one denies nothing.
    #[test]
    fn only_visible_tokens_deny() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = d.path().join("home");
        let proj = home.join("src/app");
        std::fs::create_dir_all(&proj).unwrap_or_else(|e| panic!("{e}"));
        let env = Env::new(&home);
        let config = Config::defaults();
        let projects = vec![proj.to_string_lossy().into_owned()];
        write(
            &home.join(".npmrc"),
            "//registry.npmjs.org/:_authToken=npm_secret\n",
        );
        let grants = vec![Grant::Host {
            host: "registry.npmjs.org".into(),
            port: None,
            plain_http: false,
        }];
        let allowed = |pol: &ProxyPolicy| {
            matches!(
                pol.decide(Kind::Connect, "registry.npmjs.org", 443),
                Decision::Allow { .. }
            )
        };
        assert!(allowed(&policy(&grants, &config, &env, &projects, &[])));
        // Unmasked by a grant: visible, denied.
        let mut g2 = grants.clone();
        g2.push(Grant::Unmask {
            path: home.join(".npmrc").to_string_lossy().into_owned(),
        });
        assert!(!allowed(&policy(&g2, &config, &env, &projects, &[])));
        // A token variable the call keeps.
        let ce = vec![("NPM_TOKEN".to_string(), "x".to_string())];
        assert!(!allowed(&policy(&grants, &config, &env, &projects, &ce)));
        // A project .npmrc with a token.
        write(
            &proj.join(".npmrc"),
            "//registry.npmjs.org/:_authToken=npm_secret\n",
        );
        assert!(!allowed(&policy(&grants, &config, &env, &projects, &[])));
    }
}
