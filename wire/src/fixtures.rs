//! The frozen fixtures: one example of every wire type and the full list of every closed
//! set. `efr-wire-bless` writes them to `fixtures/v1/`; the tests compare those files byte
//! for byte with what this module renders, and read each back through its type.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::always::{AlwaysOutcome, NotSavedReason};
use crate::exit::*;
use crate::explain::*;
use crate::launch::{Bus, Desktop, Grant, Launch};
use crate::launcher_status::{CgroupKind, LandlockReport, StatusLine};
use crate::mode::Mode;
use crate::rpc::{ClientFrame, ErrorCode, HelloParams, HelloResult, ServerFrame, StatusResult};
use crate::status::*;
use crate::summary::*;
use crate::surface::*;

/// One fixture: a file name under `fixtures/v1/`, its value, and a check that the value
/// reads back through its Rust type unchanged.
#[derive(Debug)]
pub struct Fixture {
    /// The file's name under `fixtures/v1/`, such as `exit_record.json`.
    pub name: &'static str,
    /// The value the file holds.
    pub value: Value,
    /// Reads the text through the fixture's type and renders it again.
    pub reread: fn(&str) -> Result<String, String>,
}

/// Renders a value the way fixture files hold it: pretty JSON and a final newline.
pub fn render<T: Serialize + ?Sized>(value: &T) -> String {
    let mut s =
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("render failed: {e}"));
    s.push('\n');
    s
}

fn reread_as<T: Serialize + DeserializeOwned>(text: &str) -> Result<String, String> {
    let value: T = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(render(&value))
}

fn fixture<T: Serialize + DeserializeOwned>(name: &'static str, value: T) -> Fixture {
    Fixture {
        name,
        value: serde_json::to_value(&value).unwrap_or(Value::Null),
        reread: reread_as::<T>,
    }
}

/// A fixture written as raw JSON, for a value the Rust type cannot make (such as a kind a
/// reader does not know), read back through type `T`.
fn raw_fixture<T: Serialize + DeserializeOwned>(name: &'static str, value: Value) -> Fixture {
    Fixture {
        name,
        value,
        reread: reread_as::<T>,
    }
}

/// An example exit record with every member set.
pub fn example_exit_record() -> ExitRecord {
    ExitRecord {
        id: "x1".into(),
        source: ExitSource::Line,
        kind: ExitKind::Upload,
        summary: "git push sends the project's commits to github.com".into(),
        action: Action {
            line: "git push origin main && npm run watch".into(),
            commands: vec!["git push origin main".into()],
            background: true,
            watch: Some("ERROR".into()),
            wake_turn: true,
            max_minutes: Some(30),
            edit: Some(Edit {
                path: "~/.bashrc".into(),
                content: "export PATH=$PATH:~/bin\n".into(),
            }),
        },
        facts: Facts {
            targets: vec![Target {
                path: "~/.bashrc".into(),
                class: TargetClass::Floor,
                op: TargetOp::Write,
                backup_before_write: true,
                masked: true,
            }],
            hosts: vec![HostFact {
                host: "github.com".into(),
                port: Some(443),
                project_remote: true,
            }],
            sockets: vec!["/run/user/1000/docker.sock".into()],
            devices: vec!["/dev/sda".into()],
            ports: vec![8080],
            signals: vec!["pkill node".into()],
            outside_commands: vec!["git push origin main".into()],
            // Only a credential exit names these: `exit_record_credential.json`.
            credential: None,
            host: None,
            desktop_read: true,
            git_code: Some(GitCode {
                checked: true,
                items: vec![GitCodeItem {
                    repo: "/home/ada/src/app".into(),
                    item: "hooks/pre-push".into(),
                    file: "/home/ada/src/app/.git/hooks/pre-push".into(),
                    writable: true,
                }],
            }),
            opaque: vec!["eval runs a string efr cannot read".into()],
            denials_in_a_row: 2,
            denials_this_turn: 3,
        },
        needs: Needs::Unsandboxed,
        judgement: Judgement {
            verdict: Verdict::UserOnly,
            by: JudgedBy::Policy,
            reasons: vec![
                "a contained call can write hooks/pre-push, which git push runs outside".into(),
            ],
        },
    }
}

/// An example status with every member set.
pub fn example_status() -> SandboxStatus {
    SandboxStatus {
        available: true,
        backend: Some(Backend::Native),
        checked_at: Some("2026-11-29T12:00:00Z".into()),
        landlock_abi: Some(6),
        seccomp: true,
        netview: true,
        netview_off: true,
        proxy: true,
        bus_proxy: false,
        bus_proxy_off: Some(BusProxyOff::NoProgram),
        socket_mediation: Some(crate::status::SocketMediation::Supervisor),
        fallback: Some(ModeFallback {
            asked: Mode::Auto,
            reason: "no user namespaces".into(),
        }),
        unavailable: Some("user namespaces are off (kernel.unprivileged_userns_clone=0)".into()),
    }
}

/// An example set of paths.
pub fn example_paths() -> SandboxPaths {
    SandboxPaths {
        runtime_dir: "/run/user/1000/efr".into(),
        socket: "/run/user/1000/efr/sandbox.sock".into(),
        scratch: "/run/user/1000/efr/scratch".into(),
        config_file: "/home/ada/.config/efr/config.toml".into(),
    }
}

/// Every fixture, in file-name order of no importance.
pub fn all() -> Vec<Fixture> {
    let grants = vec![
        Grant::Write {
            path: "/home/ada/notes".into(),
        },
        Grant::Host {
            host: "registry.npmjs.org".into(),
            port: None,
            plain_http: false,
            tcp: false,
        },
        Grant::Host {
            host: "localhost.test".into(),
            port: Some(8080),
            plain_http: true,
            tcp: false,
        },
        Grant::Host {
            host: "localhost".into(),
            port: Some(5432),
            plain_http: false,
            tcp: true,
        },
        Grant::OpenNetwork,
        Grant::Socket {
            path: "/run/user/1000/docker.sock".into(),
        },
        Grant::Bus { bus: Bus::Session },
        Grant::BusFilter { bus: Bus::System },
        Grant::Device {
            path: "/dev/video0".into(),
        },
        Grant::Unmask {
            path: "~/.aws".into(),
        },
        Grant::Desktop {
            desktop: Desktop::Wayland,
        },
        Grant::Desktop {
            desktop: Desktop::X11,
        },
        Grant::Desktop {
            desktop: Desktop::Hyprland,
        },
        Grant::Desktop {
            desktop: Desktop::Sway,
        },
        Grant::Desktop {
            desktop: Desktop::I3,
        },
        Grant::Desktop {
            desktop: Desktop::Niri,
        },
        Grant::NetView,
        Grant::Credential {
            name: "github".into(),
        },
        Grant::Unknown,
    ];
    let record = example_exit_record();
    vec![
        // Closed sets.
        fixture("modes.json", Mode::ALL.to_vec()),
        fixture("exit_kinds.json", ExitKind::ALL.to_vec()),
        fixture("exit_sources.json", ExitSource::ALL.to_vec()),
        fixture("target_classes.json", TargetClass::ALL.to_vec()),
        fixture(
            "target_ops.json",
            vec![TargetOp::Read, TargetOp::Write, TargetOp::Delete],
        ),
        fixture("verdicts.json", Verdict::ALL.to_vec()),
        fixture(
            "judged_bys.json",
            vec![JudgedBy::Floor, JudgedBy::Always, JudgedBy::Policy],
        ),
        fixture("block_reasons.json", BlockReason::ALL.to_vec()),
        fixture("index_flags.json", IndexFlag::ALL.to_vec()),
        fixture("bus_proxy_off_reasons.json", BusProxyOff::ALL.to_vec()),
        fixture(
            "socket_mediations.json",
            crate::status::SocketMediation::ALL.to_vec(),
        ),
        fixture("not_saved_reasons.json", NotSavedReason::ALL.to_vec()),
        fixture("backends.json", vec![Backend::Native, Backend::Bwrap]),
        fixture("backend_choices.json", crate::BackendChoice::ALL.to_vec()),
        fixture("run_backends.json", crate::RunBackend::ALL.to_vec()),
        fixture("enforcements.json", crate::Enforcement::ALL.to_vec()),
        fixture("buses.json", vec![Bus::Session, Bus::System]),
        fixture("desktops.json", Desktop::ALL.to_vec()),
        fixture("self_tests.json", crate::SelfTest::ALL.to_vec()),
        fixture(
            "check_outcomes.json",
            vec![CheckOutcome::Pass, CheckOutcome::Fail, CheckOutcome::Skip],
        ),
        fixture(
            "surface_change_kinds.json",
            vec![
                SurfaceChangeKind::Appeared,
                SurfaceChangeKind::Disappeared,
                SurfaceChangeKind::Changed,
            ],
        ),
        fixture(
            "access.json",
            vec![Access::None, Access::Read, Access::Write],
        ),
        fixture(
            "file_kinds.json",
            vec![
                FileKind::File,
                FileKind::Dir,
                FileKind::Symlink,
                FileKind::Socket,
                FileKind::Fifo,
                FileKind::BlockDevice,
                FileKind::CharDevice,
                FileKind::Missing,
            ],
        ),
        fixture("error_codes.json", ErrorCode::ALL.to_vec()),
        fixture("grants.json", grants.clone()),
        fixture(
            "launches.json",
            vec![
                Launch::Direct,
                Launch::Contained { grants: vec![] },
                Launch::Contained {
                    grants: vec![Grant::NetView],
                },
                Launch::Contained {
                    grants: vec![
                        Grant::Write {
                            path: "/home/ada/notes".into(),
                        },
                        Grant::Host {
                            host: "crates.io".into(),
                            port: None,
                            plain_http: false,
                            tcp: false,
                        },
                        Grant::BusFilter { bus: Bus::Session },
                    ],
                },
                Launch::Unsandboxed,
            ],
        ),
        fixture(
            "needs.json",
            vec![
                Needs::Contained {
                    grants: vec![Grant::Write {
                        path: "/etc/hosts".into(),
                    }],
                },
                Needs::Unsandboxed,
                Needs::Nothing,
            ],
        ),
        fixture(
            "always_saved.json",
            vec![
                AlwaysOutcome::Saved {
                    index: 3,
                    rule: "run `cargo publish` in ~/src/app".into(),
                },
                AlwaysOutcome::NotSaved {
                    reason: NotSavedReason::Changed,
                },
                AlwaysOutcome::Unknown,
            ],
        ),
        // Types.
        fixture("exit_record.json", record.clone()),
        fixture(
            "exit_record_minimal.json",
            ExitRecord {
                id: "x2".into(),
                source: ExitSource::Denial,
                kind: ExitKind::Write,
                summary: "a write to /etc/hosts was refused".into(),
                action: Action::default(),
                facts: Facts::default(),
                needs: Needs::Contained {
                    grants: vec![Grant::Write {
                        path: "/etc/hosts".into(),
                    }],
                },
                judgement: Judgement {
                    verdict: Verdict::Review,
                    by: JudgedBy::Policy,
                    reasons: vec![],
                },
            },
        ),
        fixture(
            "exit_record_credential.json",
            ExitRecord {
                id: "denial-1".into(),
                source: ExitSource::Denial,
                kind: ExitKind::Credential,
                summary: "the placeholder of credential github was sent to paste.example.net, \
                          which it is not bound to"
                    .into(),
                action: Action::default(),
                facts: Facts {
                    hosts: vec![HostFact {
                        host: "paste.example.net".into(),
                        port: Some(443),
                        project_remote: false,
                    }],
                    credential: Some("github".into()),
                    host: Some("paste.example.net".into()),
                    ..Facts::default()
                },
                needs: Needs::Nothing,
                judgement: Judgement {
                    verdict: Verdict::Refuse,
                    by: JudgedBy::Policy,
                    reasons: vec![
                        "a credential is sent only to the hosts it is bound to".into(),
                    ],
                },
            },
        ),
        fixture(
            "exit_info.json",
            ExitInfo {
                id: record.id.clone(),
                kind: record.kind,
                source: record.source,
                summary: record.summary.clone(),
                needs: record.needs.clone(),
                always: Some("git push in ~/src/app".into()),
            },
        ),
        fixture(
            "mode_fallback.json",
            ModeFallback {
                asked: Mode::Full,
                reason: "root".into(),
            },
        ),
        fixture("sandbox_status.json", example_status()),
        fixture("sandbox_status_minimal.json", SandboxStatus::default()),
        fixture(
            "sandbox_check.json",
            SandboxCheck {
                status: example_status(),
                tests: vec![
                    CheckTest {
                        name: crate::SelfTest::Userns,
                        outcome: CheckOutcome::Pass,
                        ms: 3,
                        detail: "own user namespace, uid 1000 maps to 1000".into(),
                        required: true,
                    },
                    CheckTest {
                        name: crate::SelfTest::BackendBwrap,
                        outcome: CheckOutcome::Skip,
                        ms: 0,
                        detail: "bubblewrap is not installed (apt install bubblewrap)".into(),
                        required: false,
                    },
                ],
                ms: 412,
            },
        ),
        fixture("sandbox_paths.json", example_paths()),
        fixture(
            "sandbox_summary.json",
            SandboxSummary {
                proxied: true,
                blocked: vec![
                    Blocked {
                        host: "evil.example".into(),
                        port: 443,
                        reason: BlockReason::NotAllowed,
                        count: 3,
                    },
                    Blocked {
                        host: "127.0.0.1".into(),
                        port: 443,
                        reason: BlockReason::IpLiteral,
                        count: 1,
                    },
                    Blocked {
                        host: "paste.example".into(),
                        port: 443,
                        reason: BlockReason::Credential,
                        count: 1,
                    },
                ],
                blocked_more: 4,
                credentials_used: vec![crate::summary::CredentialUse {
                    name: "forge".into(),
                    host: "git.example.com".into(),
                    method: "POST".into(),
                    path: "/ada/app.git/git-receive-pack".into(),
                    count: 2,
                }],
                credentials_used_more: 0,
                tcp_relayed: 2,
                bus_refused: vec![BusRefused {
                    bus: Bus::Session,
                    name: "org.freedesktop.secrets".into(),
                    member: Some("GetSecret".into()),
                    path: Some("/org/freedesktop/secrets".into()),
                    count: 2,
                    cut: None,
                }],
                bus_refused_more: 1,
                cache_deletes: vec!["/home/ada/.npm/_cacache/content-v2/sha512/0f/3a".into()],
                cache_deletes_more: 2,
                cache_refused: vec![
                    "/home/ada/.npm/_cacache/tmp/x: a symbolic link: only plain files and directories are merged".into(),
                ],
                denied_writes: vec!["/etc/hosts".into()],
                host_refused: vec!["open /mnt/ro/app/out.log: read-only file system (the host's mount)".into()],
                quarantined: vec![
                    "/home/ada/src/app/vendor/x/.git/hooks/pre-commit: a hook written by the call, moved to /home/ada/src/app/vendor/x/.git/efr-quarantine-3f9a1c22b07e/pre-commit".into(),
                ],
                index_flags: vec![
                    IndexFlagSet {
                        repo: "/home/ada/src/app".into(),
                        path: "Makefile".into(),
                        flag: IndexFlag::SkipWorktree,
                        undone: true,
                        kept: None,
                    },
                    IndexFlagSet {
                        repo: "/home/ada/src/app".into(),
                        path: "docs/big.md".into(),
                        flag: IndexFlag::SkipWorktree,
                        undone: false,
                        kept: Some("sparse checkout is on and the file is not in the work tree: git sparse-checkout set it".into()),
                    },
                ],
                index_flags_more: 3,
                index_unchecked: vec![
                    "/home/ada/src/app/vendor/x: the index is larger than 256 MiB: not compared".into(),
                ],
                full_tmpfs: vec!["/tmp".into()],
                linked_protected: vec!["/home/ada/src/app/.git/config".into()],
                home_file_changed: vec![HomeFileChanged {
                    path: "/home/ada/.bashrc".into(),
                    floor: true,
                    real: Some("/home/ada/dotfiles/bashrc".into()),
                    backup: Some(
                        "/home/ada/.local/state/efr/backups/%2Fhome%2Fada%2Fdotfiles%2Fbashrc.1764633600000000000.1"
                            .into(),
                    ),
                }],
                home_file_changed_more: 1,
                survivors: vec!["sudo".into()],
                env_dropped: vec!["PIP_INDEX_URL".into()],
                setup_error: Some("project root /home/ada/gone does not exist".into()),
            },
        ),
        fixture("sandbox_summary_minimal.json", SandboxSummary::default()),
        fixture(
            "cache_delete_apply_params.json",
            crate::rpc::CacheDeleteApplyParams {
                paths: vec!["/home/ada/.npm/_cacache/content-v2/sha512/0f/3a".into()],
            },
        ),
        fixture(
            "cache_delete_apply_result.json",
            crate::rpc::CacheDeleteApplyResult {
                paths: vec!["/home/ada/.npm/_cacache/content-v2/sha512/0f/3a".into()],
                freed_bytes: 48213,
            },
        ),
        fixture(
            "finish.json",
            Finish {
                sandbox_summary: SandboxSummary {
                    denied_writes: vec!["/home/ada/src/app/.git/hooks/pre-commit".into()],
                    ..Default::default()
                },
                exits: vec![example_exit_record()],
                code: Some(1),
                signal: None,
                exit_status: 1,
                duration_ms: 412,
                approvals: vec![],
            },
        ),
        fixture(
            "finish_approvals.json",
            Finish {
                exits: vec![example_exit_record()],
                code: Some(6),
                exit_status: 6,
                duration_ms: 230,
                approvals: vec![crate::ApprovalRef {
                    exit: "host-1".into(),
                    approval: "7k2p".into(),
                }],
                ..Default::default()
            },
        ),
        fixture(
            "finish_signal.json",
            Finish {
                signal: Some(2),
                exit_status: 130,
                duration_ms: 9,
                ..Default::default()
            },
        ),
        fixture(
            "blocked.json",
            Blocked {
                host: "pypi.org".into(),
                port: 443,
                reason: BlockReason::Denied,
                count: 1,
            },
        ),
        fixture(
            "bus_refused.json",
            BusRefused {
                bus: Bus::System,
                name: "org.freedesktop.login1".into(),
                member: None,
                path: None,
                count: 1,
                cut: None,
            },
        ),
        fixture(
            "bus_refused_cut.json",
            BusRefused {
                bus: Bus::Session,
                name: "org.freedesktop.Notifications".into(),
                member: None,
                path: None,
                count: 1,
                cut: Some(
                    "talk org.freedesktop.Notifications: org.freedesktop.Notifications's \
                     connection (:1.12) also owns org.gnome.Shell, which no bus filter opens \
                     (Eval runs JavaScript in the shell); the rule would reach it by the \
                     connection's unique name"
                        .into(),
                ),
            },
        ),
        fixture(
            "surface_change.json",
            SurfaceChange {
                path: "~/.npmrc".into(),
                change: SurfaceChangeKind::Changed,
                why: "now holds a token for registry.npmjs.org".into(),
                masked: true,
                question_id: Some(QuestionId::from_number(1)),
            },
        ),
        fixture(
            "reported_file.json",
            ReportedFile {
                path: "~/.bashrc".into(),
                what: "a line was added".into(),
                floor: true,
                backup: Some("~/.local/state/efr/backups/bashrc.1".into()),
                class: None,
                hosts: Vec::new(),
                question_id: None,
                kept: false,
            },
        ),
        fixture("question_id.json", QuestionId::from_number(12)),
        fixture(
            "reported_file_finding.json",
            ReportedFile {
                path: "/home/ada/.npmrc".into(),
                what: "holds a token for registry.npmjs.org".into(),
                floor: false,
                backup: None,
                class: Some("token".into()),
                hosts: vec!["registry.npmjs.org".into()],
                question_id: Some(QuestionId::from_number(2)),
                kept: false,
            },
        ),
        fixture(
            "surface_params.json",
            SurfaceParams {
                projects: vec!["/home/ada/src/app".into()],
                conversation: "c1".into(),
            },
        ),
        fixture(
            "surface_result.json",
            SurfaceResult {
                files: vec![ReportedFile {
                    path: "/home/ada/.aws/credentials".into(),
                    what: "looks like credentials (glob:*credentials*)".into(),
                    floor: false,
                    backup: None,
                    class: Some("credentials".into()),
                    hosts: Vec::new(),
                    question_id: None,
                    kept: true,
                }],
                changes: vec![SurfaceChange {
                    path: "/home/ada/.npmrc".into(),
                    change: SurfaceChangeKind::Changed,
                    why: "now holds a token for registry.npmjs.org".into(),
                    masked: false,
                    question_id: Some(QuestionId::from_number(2)),
                }],
                partial: Some(SurfacePartial {
                    why: "time".into(),
                    at: "/home/ada/big".into(),
                }),
                ms: 1000,
            },
        ),
        fixture(
            "surface_respond_params.json",
            SurfaceRespondParams {
                conversation: "c1".into(),
                question_id: QuestionId::from_number(2),
                keep: false,
            },
        ),
        fixture(
            "surface_respond_result.json",
            SurfaceRespondResult {
                path: "/home/ada/.npmrc".into(),
                keep: false,
                masked: true,
            },
        ),
        fixture(
            "floor_write_params.json",
            FloorWriteParams {
                path: "~/.bashrc".into(),
                edit: None,
                line: Some("export PATH=\"$HOME/.local/bin:$PATH\"".into()),
            },
        ),
        fixture(
            "floor_write_result.json",
            FloorWriteResult {
                home_file_changed: HomeFileChanged {
                    path: "/home/ada/.bashrc".into(),
                    floor: true,
                    real: Some("/home/ada/dotfiles/bashrc".into()),
                    backup: Some(
                        "/home/ada/.local/state/efr/backups/%2Fhome%2Fada%2Fdotfiles%2Fbashrc.1764642000000000000.1"
                            .into(),
                    ),
                },
            },
        ),
        fixture(
            "explain_params.json",
            ExplainParams {
                path: ".git/hooks/pre-commit".into(),
                cwd: Some("/home/ada/src/app".into()),
                projects: vec!["/home/ada/src/app".into()],
            },
        ),
        fixture(
            "explain_result.json",
            ExplainResult {
                path: ".git/hooks".into(),
                canonical: "/home/ada/src/app/.git/hooks".into(),
                shown: "app/.git/hooks".into(),
                exists: true,
                kind: FileKind::Dir,
                link: None,
                class: TargetClass::Project,
                access: Access::Read,
                writable_by: Some(RuleHit {
                    key: "--project".into(),
                    rule: "/home/ada/src/app".into(),
                    reason: "a project root of the turn is writable".into(),
                }),
                masked: None,
                floor: Some(RuleHit {
                    key: "floors.paths".into(),
                    rule: ".git/hooks".into(),
                    reason: "git runs hooks outside the sandbox".into(),
                }),
                read_only: Some(RuleHit {
                    key: "sandbox.read_only_inside".into(),
                    rule: ".git/hooks".into(),
                    reason: "git runs hooks outside the sandbox".into(),
                }),
                grant: Some(GrantHint {
                    grant: Grant::Write {
                        path: "/home/ada/src/app/.git/hooks".into(),
                    },
                    effect: "a contained call could write it".into(),
                    user_only: true,
                }),
                non_utf8: false,
            },
        ),
        fixture(
            "explain_result_link.json",
            ExplainResult {
                path: "~/.ssh/id_link".into(),
                canonical: "/home/ada/.ssh/id_ed25519".into(),
                shown: "~/.ssh/id_ed25519".into(),
                exists: true,
                kind: FileKind::Symlink,
                link: Some(LinkInfo {
                    link: "/home/ada/.ssh/id_link".into(),
                    points_to: "id_ed25519".into(),
                    resolved: "/home/ada/.ssh/id_ed25519".into(),
                    target_kind: FileKind::File,
                }),
                class: TargetClass::Masked,
                access: Access::None,
                writable_by: None,
                masked: Some(RuleHit {
                    key: "sandbox.masks".into(),
                    rule: "~/.ssh".into(),
                    reason: "ssh keys".into(),
                }),
                floor: None,
                read_only: None,
                grant: Some(GrantHint {
                    grant: Grant::Unmask {
                        path: "/home/ada/.ssh".into(),
                    },
                    effect: "a contained call could read it".into(),
                    user_only: false,
                }),
                non_utf8: true,
            },
        ),
        fixture(
            "hello_params.json",
            HelloParams {
                protocol: crate::PROTOCOL_VERSION,
                client: Some("efrd 0.0.6".into()),
            },
        ),
        fixture(
            "hello_result.json",
            HelloResult {
                protocol: crate::PROTOCOL_VERSION,
                server: "efr-sandbox".into(),
                version: "0.1.0".into(),
                methods: vec![
                    "hello".into(),
                    "sandbox.status".into(),
                    "sandbox.explain".into(),
                ],
            },
        ),
        fixture(
            "status_result.json",
            StatusResult {
                status: example_status(),
                paths: example_paths(),
            },
        ),
        fixture(
            "client_request.json",
            ClientFrame::Request {
                id: 7,
                method: "sandbox.explain".into(),
                params: json!({"path": "~/.ssh", "cwd": "/home/ada/src/app"}),
            },
        ),
        fixture("client_cancel.json", ClientFrame::Cancel { cancel: 7 }),
        fixture(
            "server_item.json",
            ServerFrame::Item {
                id: 8,
                item: json!({"kind": "started", "pid": 4242}),
            },
        ),
        fixture(
            "server_end.json",
            ServerFrame::End {
                id: 7,
                end: json!({"exists": true}),
            },
        ),
        fixture(
            "server_error.json",
            ServerFrame::Error {
                id: Some(7),
                error: crate::rpc::ErrorBody {
                    code: ErrorCode::ProtocolMismatch,
                    message: "client speaks protocol 2, this service speaks 1".into(),
                    data: Some(json!({"client": 2, "service": 1})),
                },
            },
        ),
        // Values from a newer writer, read as `unknown`.
        raw_fixture::<Vec<Grant>>(
            "unknown_grant.json",
            json!([{"kind": "teleport", "where": "mars"}, {"kind": "write", "path": "/srv"}]),
        ),
        raw_fixture::<Vec<BlockReason>>("unknown_block_reason.json", json!(["quota", "not_tls"])),
        // The launcher's status lines (`efr-launch --status-fd`).
        fixture(
            "status_started.json",
            StatusLine::Started {
                launcher_pid: 4242,
                start_time_ms: 1_764_633_600_000,
                pid: 4244,
                backend: crate::RunBackend::Native,
                landlock: Some(LandlockReport {
                    abi: 6,
                    status: crate::Enforcement::FullyEnforced,
                    net: true,
                    scopes: true,
                    unix_sockets: false,
                }),
                seccomp: true,
                supervised: true,
                cgroup: None,
            },
        ),
        fixture(
            "status_started_unsandboxed.json",
            StatusLine::Started {
                launcher_pid: 4242,
                start_time_ms: 1_764_633_600_000,
                pid: 4243,
                backend: crate::RunBackend::Unsandboxed,
                landlock: None,
                seccomp: false,
                supervised: false,
                cgroup: Some(CgroupKind::V2),
            },
        ),
        fixture(
            "status_setup_error.json",
            StatusLine::SetupError {
                message: "cwd /home/ada/src/gone: No such file or directory".into(),
            },
        ),
        fixture(
            "status_exited.json",
            StatusLine::Exited {
                code: Some(1),
                signal: None,
                duration_ms: 812,
                denials: vec![
                    "/home/ada/src/app/.git/config".into(),
                    "/home/ada/src/app/docs/config".into(),
                ],
                full_tmpfs: vec!["/tmp".into()],
                survivors: vec!["sleep".into()],
                socket_denials: vec!["/run/user/1000/bus".into()],
                linked_protected: vec!["/home/ada/src/app/.envrc".into()],
                loopback_refused: vec![5432],
                git_denials: vec![crate::GitDenial {
                    path: "/home/ada/src/app/docs/config".into(),
                    reason: "a git config with keys off git.safe_config_keys: core.fsmonitor"
                        .into(),
                }],
                host_refused: vec![
                    "open /mnt/ro/app/out.log: read-only file system (the host's mount)".into(),
                ],
            },
        ),
        fixture(
            "status_exited_signal.json",
            StatusLine::Exited {
                code: None,
                signal: Some(9),
                duration_ms: 3,
                denials: Vec::new(),
                full_tmpfs: Vec::new(),
                survivors: Vec::new(),
                socket_denials: Vec::new(),
                linked_protected: Vec::new(),
                loopback_refused: Vec::new(),
                git_denials: Vec::new(),
                host_refused: Vec::new(),
            },
        ),
        fixture(
            "cgroup_kinds.json",
            vec![CgroupKind::V2, CgroupKind::V1Freezer, CgroupKind::None],
        ),
        fixture(
            "classify_request.json",
            crate::ClassifyRequest {
                line: "npm install left-pad && git push".into(),
                cwd: Some("/home/ada/src/app".into()),
                mode: Mode::Cautious,
                project_roots: vec!["/home/ada/src/app".into()],
                granted: Some(Launch::Contained {
                    grants: vec![Grant::Host {
                        host: "registry.npmjs.org".into(),
                        port: None,
                        plain_http: false,
                        tcp: false,
                    }],
                }),
                denials_in_a_row: 1,
                denials_this_turn: 2,
            },
        ),
        fixture(
            "classify_request_minimal.json",
            crate::ClassifyRequest::new("ls", None, Mode::Auto),
        ),
        fixture(
            "classify_result.json",
            crate::ClassifyResult {
                launch: Launch::Contained {
                    grants: vec![Grant::Host {
                        host: "registry.npmjs.org".into(),
                        port: None,
                        plain_http: false,
                        tcp: false,
                    }],
                },
                exits: vec![record.clone()],
                opaque: Vec::new(),
                notes: vec!["`sleep 9 &` runs in the background and ends with the line".into()],
            },
        ),
        fixture(
            "classify_result_minimal.json",
            crate::ClassifyResult {
                launch: Launch::Contained { grants: vec![] },
                exits: vec![],
                opaque: Vec::new(),
                notes: vec![],
            },
        ),
    ]
    .into_iter()
    .chain(call_fixtures())
    .collect()
}

/// The call's params and the launch stream's items (`efr-call`).
fn call_fixtures() -> Vec<Fixture> {
    use crate::call::*;
    let call = CallParams {
        line: "cargo test".into(),
        cwd: Some("/home/ada/src/app".into()),
        projects: vec!["/home/ada/src/app".into()],
        grants: vec![Grant::Host {
            host: "crates.io".into(),
            port: None,
            plain_http: false,
            tcp: false,
        }],
        backend: Some("native".into()),
        unsandboxed: false,
        conversation: Some("conv-1".into()),
        background: None,
        shell: Some("bash".into()),
        shell_args: Vec::new(),
    };
    let call_params = call.clone();
    vec![
        fixture("call_params.json", call.clone()),
        fixture(
            "call_params_minimal.json",
            CallParams {
                line: "true".into(),
                ..Default::default()
            },
        ),
        fixture(
            "call_params_shell.json",
            CallParams {
                line: "source .venv/bin/activate && pytest".into(),
                shell: Some("bash".into()),
                shell_args: vec![
                    "-e".into(),
                    "-l".into(),
                    "-c".into(),
                    "source .venv/bin/activate && pytest".into(),
                    "efr-bash".into(),
                ],
                conversation: Some("conv-1".into()),
                ..Default::default()
            },
        ),
        fixture(
            "plan_params.json",
            PlanParams {
                call: call.clone(),
                status_fd: Some(3),
            },
        ),
        fixture(
            "run_params.json",
            RunParams {
                call: call.clone(),
                env: vec![crate::plan::EnvVar {
                    name: "PATH".into(),
                    value: "/usr/local/bin:/usr/bin:/bin".into(),
                }],
                env_args: vec!["RUST_LOG=debug".into()],
                home: "/home/ada".into(),
                runtime_dir: Some("/run/user/1000".into()),
                config_home: None,
                build: "2049:131077:13522288:1764780000".into(),
            },
        ),
        fixture(
            "plan_result.json",
            PlanResult {
                token: "0123456789abcdef0123456789abcdef".into(),
                argv: vec![
                    "/usr/libexec/efr-launch".into(),
                    "--plan".into(),
                    "/run/user/1000/efr/plans/0123456789abcdef0123456789abcdef.json".into(),
                    "--status-fd".into(),
                    "3".into(),
                ],
                plan_file: "/run/user/1000/efr/plans/0123456789abcdef0123456789abcdef.json".into(),
                status_fd: 3,
            },
        ),
        fixture(
            "finish_params.json",
            FinishParams {
                token: "0123456789abcdef0123456789abcdef".into(),
                status: "{\"kind\":\"exited\",\"code\":0,\"duration_ms\":4}\n".into(),
            },
        ),
        fixture(
            "launch_items.json",
            vec![
                LaunchItem::Started(Started {
                    launcher_pid: 4242,
                    pid: 2,
                    backend: crate::RunBackend::Native,
                    landlock: Some(json!({"abi": 6, "status": "enforced"})),
                    seccomp: true,
                    cgroup: None,
                    call_id: Some("call-7".into()),
                }),
                LaunchItem::Output {
                    stream: OutputStream::Stdout,
                    data: OutputData::Data("ok\n".into()),
                },
                LaunchItem::Output {
                    stream: OutputStream::Stderr,
                    data: OutputData::DataB64("/w==".into()),
                },
                LaunchItem::Exit {
                    record: Box::new(ExitRecord {
                        id: "denial-1".into(),
                        source: ExitSource::Denial,
                        kind: ExitKind::Write,
                        summary: "write /etc/hosts (refused by the sandbox)".into(),
                        action: Action {
                            line: "echo x > /etc/hosts".into(),
                            ..Default::default()
                        },
                        facts: Facts::default(),
                        needs: Needs::Contained {
                            grants: vec![Grant::Write {
                                path: "/etc/hosts".into(),
                            }],
                        },
                        judgement: Judgement {
                            verdict: Verdict::Review,
                            by: JudgedBy::Policy,
                            reasons: vec!["outside the call's writable roots".into()],
                        },
                    }),
                },
                LaunchItem::EnvDropped {
                    name: "GITHUB_TOKEN".into(),
                    why: "its value looks like a secret (a GitHub token)".into(),
                },
            ],
        ),
        fixture("plan.json", example_plan()),
        fixture(
            "plan_minimal.json",
            crate::plan::Plan::contained("true", "/home/ada/proj"),
        ),
    ]
    .into_iter()
    .chain(job_fixtures(call_params))
    .chain(approval_fixtures())
    .collect()
}

/// An example job with every member set.
pub fn example_job() -> crate::job::JobInfo {
    use crate::job::*;
    JobInfo {
        id: "j2".into(),
        conversation_id: Some("conv-1".into()),
        call_id: "call-7".into(),
        command: "npm run dev".into(),
        launch: Launch::Contained { grants: vec![] },
        state: JobState::Failed,
        started_at: 1_796_342_400_000,
        ends_by: 1_796_344_200_000,
        ended_at: Some(1_796_342_460_000),
        exit_code: None,
        signal: Some(9),
        stopped_by: None,
        reason: Some("the job reached its memory limit (512 MiB)".into()),
        watch: Some(JobWatch {
            pattern: "ready on".into(),
            max_wakes: 1,
        }),
        output_bytes: 73_421,
        wakes: 1,
        forwards: vec![JobForward {
            listen: "127.0.0.1".into(),
            port: 5173,
        }],
        unforwarded: vec![],
        cgroup: Some(JobCgroupInfo {
            off: None,
            off_detail: None,
            memory_bytes: Some(536_870_912),
            cpu_usec: Some(1_250_000),
            memory_max: Some(536_870_912),
            pids_max: Some(512),
        }),
        moved_from: Some(MovedFrom {
            call_id: "call-7".into(),
            after_secs: 12.5,
        }),
        launcher_lost: false,
        survivors: vec![],
    }
}

/// The fixtures of background jobs (`crate::job`).
/// An approval of a call refused a host.
pub fn example_approval() -> crate::Approval {
    crate::Approval {
        id: "7k2p".into(),
        line: "curl -fsS https://registry.npmjs.org/left-pad".into(),
        conversation: Some("conv-1".into()),
        projects: vec!["/home/ada/src/app".into()],
        exits: vec![example_exit_record()],
        grants: vec![Grant::Host {
            host: "registry.npmjs.org".into(),
            port: None,
            plain_http: false,
            tcp: false,
        }],
        at: 1_796_342_400_000,
    }
}

fn approval_fixtures() -> Vec<Fixture> {
    use crate::approval::*;
    let a = example_approval();
    vec![
        fixture(
            "approvals_result.json",
            ApprovalsResult {
                approvals: vec![
                    a.clone(),
                    Approval {
                        id: "m3q9".into(),
                        conversation: None,
                        projects: vec![],
                        ..a.clone()
                    },
                ],
            },
        ),
        fixture(
            "approval_decide_params.json",
            vec![
                ApprovalDecideParams {
                    id: "7k2p".into(),
                    decision: ApprovalDecision::Approve,
                },
                ApprovalDecideParams {
                    id: "7k2p".into(),
                    decision: ApprovalDecision::Always,
                },
                ApprovalDecideParams {
                    id: "7k2p".into(),
                    decision: ApprovalDecision::Deny,
                },
            ],
        ),
        fixture(
            "approval_decide_result.json",
            ApprovalDecideResult {
                approval: a.clone(),
                decision: ApprovalDecision::Always,
                rules: vec!["allow host exits to registry.npmjs.org".into()],
            },
        ),
        fixture(
            "approval_record_params.json",
            ApprovalRecordParams {
                line: a.line.clone(),
                conversation: a.conversation.clone(),
                projects: a.projects.clone(),
                exits: a.exits.clone(),
            },
        ),
        fixture(
            "approval_record_result.json",
            ApprovalRecordResult {
                approvals: vec![ApprovalRef {
                    exit: "x1".into(),
                    approval: "7k2p".into(),
                }],
            },
        ),
        fixture(
            "standing_grants_params.json",
            StandingGrantsParams {
                conversation: "conv-1".into(),
            },
        ),
        fixture(
            "standing_grants_result.json",
            StandingGrantsResult {
                grants: a.grants.clone(),
            },
        ),
        fixture(
            "approval_store.json",
            ApprovalStore {
                version: ApprovalStore::VERSION,
                pending: vec![PendingApproval {
                    uid: 1000,
                    approval: a.clone(),
                }],
                standing: vec![StandingGrants {
                    conversation: "conv-2".into(),
                    uid: 1000,
                    grants: a.grants,
                    at: 1_796_342_460_000,
                }],
            },
        ),
    ]
}

fn job_fixtures(call: crate::call::CallParams) -> Vec<Fixture> {
    use crate::call::*;
    use crate::job::*;
    let job = example_job();
    let minimal = JobInfo {
        id: "j1".into(),
        conversation_id: None,
        call_id: "call-1".into(),
        command: "python3 -m http.server 8000".into(),
        launch: Launch::Contained { grants: vec![] },
        state: JobState::Running,
        started_at: 1_796_342_400_000,
        ends_by: 1_796_342_700_000,
        ended_at: None,
        exit_code: None,
        signal: None,
        stopped_by: None,
        reason: None,
        watch: None,
        output_bytes: 0,
        wakes: 0,
        forwards: vec![],
        unforwarded: vec![],
        cgroup: Some(JobCgroupInfo {
            off: Some(CgroupOff::V1Only),
            off_detail: Some(
                "memory and pids are cgroup v1 controllers here, not delegated to users".into(),
            ),
            ..Default::default()
        }),
        moved_from: None,
        launcher_lost: false,
        survivors: vec![],
    };
    let event = |seq, what| JobEvent {
        seq,
        conversation_id: Some("conv-1".into()),
        job_id: "j2".into(),
        what,
    };
    vec![
        fixture(
            "call_params_background.json",
            CallParams {
                line: "npm run dev".into(),
                background: Some(Background {
                    max_minutes: 30.0,
                    watch: Some("ready on".into()),
                    max_wakes: Some(1),
                }),
                ..call
            },
        ),
        fixture("job_info.json", job.clone()),
        fixture("job_info_minimal.json", minimal.clone()),
        fixture(
            "job_info_unforwarded.json",
            JobInfo {
                id: "j3".into(),
                command: "python3 -m http.server 8000 & python3 -m http.server 22".into(),
                forwards: vec![],
                unforwarded: vec![
                    JobPortOutcome {
                        listen: "127.0.0.1".into(),
                        port: 8000,
                        outcome: ForwardOutcome::InUse,
                        by_job: Some("j1".into()),
                        reason: None,
                    },
                    JobPortOutcome {
                        listen: "127.0.0.1".into(),
                        port: 22,
                        outcome: ForwardOutcome::Refused,
                        by_job: None,
                        reason: Some("port 22 is below 1024".into()),
                    },
                ],
                ..minimal.clone()
            },
        ),
        fixture(
            "launch_items_job.json",
            vec![
                LaunchItem::Job(Box::new(JobStarted {
                    job: minimal.clone(),
                })),
                LaunchItem::Moved {
                    job_id: "j2".into(),
                },
            ],
        ),
        fixture(
            "job_handed_off.json",
            vec![
                JobHandedOff {
                    job_id: "j1".into(),
                    moved: false,
                },
                JobHandedOff {
                    job_id: "j2".into(),
                    moved: true,
                },
            ],
        ),
        fixture(
            "jobs_params.json",
            JobsParams {
                conversation: Some("conv-1".into()),
            },
        ),
        fixture(
            "jobs_result.json",
            JobsResult {
                jobs: vec![job.clone(), minimal],
            },
        ),
        fixture(
            "job_stop_params.json",
            JobStopParams {
                conversation: Some("conv-1".into()),
                job_id: "j2".into(),
                stopped_by: Some(JobStopBy::User),
            },
        ),
        fixture("job_stop_result.json", JobStopResult { job }),
        fixture(
            "job_output_params.json",
            JobOutputParams {
                conversation: Some("conv-1".into()),
                job_id: "j2".into(),
                offset: 4096,
                follow: true,
            },
        ),
        fixture(
            "job_output_items.json",
            vec![
                JobOutputItem::Skipped {
                    from: 4096,
                    to: 8192,
                },
                JobOutputItem::Output {
                    offset: 8192,
                    stream: OutputStream::Stdout,
                    data: OutputData::Data("  VITE ready on http://localhost:5173/\n".into()),
                },
            ],
        ),
        fixture(
            "job_output_end.json",
            JobOutputEnd {
                next_offset: 73_421,
                state: JobState::Exited,
            },
        ),
        fixture(
            "job_events_params.json",
            JobEventsParams {
                conversation: Some("conv-1".into()),
                since: Some(41),
            },
        ),
        fixture(
            "job_events.json",
            vec![
                event(
                    42,
                    JobEventKind::JobWatchMatched {
                        line: "  VITE ready on http://localhost:5173/".into(),
                        wakes_left: 0,
                    },
                ),
                event(
                    43,
                    JobEventKind::JobPortForwarded {
                        listen: "127.0.0.1".into(),
                        port: 5173,
                        outcome: ForwardOutcome::Forwarded,
                        by_job: None,
                        reason: None,
                    },
                ),
                event(
                    44,
                    JobEventKind::JobPortForwarded {
                        listen: "127.0.0.1".into(),
                        port: 5432,
                        outcome: ForwardOutcome::InUse,
                        by_job: Some("j1".into()),
                        reason: None,
                    },
                ),
                event(
                    45,
                    JobEventKind::JobEnded {
                        state: JobState::Stopped,
                        exit_code: None,
                        stopped_by: Some(JobStopBy::User),
                        reason: None,
                        output_bytes: 73_421,
                        ran_secs: 61.5,
                        tail: "  VITE ready on http://localhost:5173/\n".into(),
                        output_truncated: true,
                        launcher_lost: false,
                        survivors: vec![],
                        exits: vec![],
                    },
                ),
                event(46, JobEventKind::Lagged { missed: 3 }),
                event(
                    47,
                    JobEventKind::JobGuarded {
                        quarantined: vec![
                            "/home/ada/src/app/wt/.git: made by the call, names the git dir \
                             /home/ada/other/.git outside the project; moved to \
                             /home/ada/src/app/wt/.git.efr-quarantine"
                                .into(),
                        ],
                        index_flags: vec![crate::IndexFlagSet {
                            repo: "/home/ada/src/app".into(),
                            path: "Makefile".into(),
                            flag: crate::IndexFlag::SkipWorktree,
                            undone: true,
                            kept: None,
                        }],
                    },
                ),
            ],
        ),
        fixture(
            "call_background_params.json",
            CallBackgroundParams {
                conversation: Some("conv-1".into()),
                call_id: "call-7".into(),
                max_minutes: 30.0,
            },
        ),
        fixture(
            "call_background_result.json",
            CallBackgroundResult {
                job_id: "j2".into(),
            },
        ),
        fixture(
            "job_states.json",
            vec![
                JobState::Running,
                JobState::Exited,
                JobState::Stopped,
                JobState::TimedOut,
                JobState::Failed,
                JobState::Unknown,
            ],
        ),
        fixture(
            "job_stop_causes.json",
            vec![
                JobStopBy::Model,
                JobStopBy::User,
                JobStopBy::TimeLimit,
                JobStopBy::DaemonStop,
                JobStopBy::DaemonRestart,
                JobStopBy::Guard,
                JobStopBy::FullOff,
                JobStopBy::Unknown,
            ],
        ),
        fixture(
            "forward_outcomes.json",
            vec![
                ForwardOutcome::Forwarded,
                ForwardOutcome::InUse,
                ForwardOutcome::Refused,
                ForwardOutcome::Limit,
                ForwardOutcome::Stopped,
                ForwardOutcome::Unknown,
            ],
        ),
        fixture(
            "cgroup_offs.json",
            vec![
                CgroupOff::Config,
                CgroupOff::NoDelegation,
                CgroupOff::V1Only,
                CgroupOff::NoControllers,
                CgroupOff::Error,
                CgroupOff::Unknown,
            ],
        ),
    ]
}

/// An example plan with every member set (what efr-call writes for the launcher).
pub fn example_plan() -> crate::plan::Plan {
    use crate::plan::*;
    Plan {
        version: PLAN_VERSION,
        mode: PlanMode::Contained,
        backend: Backend::Bwrap,
        line: "npm install && git status".into(),
        shell: Some("/bin/bash".into()),
        shell_args: vec![
            "-l".into(),
            "-c".into(),
            "npm install && git status".into(),
            "bash".into(),
        ],
        cwd: "/home/ada/proj".into(),
        home: Some("/home/ada".into()),
        projects: vec!["/home/ada/proj".into()],
        scratch: Some("/run/user/1000/efr/scratch/c1".into()),
        tmp: Some("/run/user/1000/efr/tmp/c1".into()),
        tmp_size: Some("2G".into()),
        shm_size: Some("10%".into()),
        processes_max: Some(1024),
        read_only_inside: vec!["/home/ada/proj/.git/hooks".into()],
        protect_names: vec![".envrc".into(), "**/.git/config".into()],
        git_safe_keys: Some(vec!["core.bare".into(), "remote.*.url".into()]),
        masks: vec!["/home/ada/.ssh".into(), "/home/ada/.npmrc".into()],
        scrubbed: vec![ScrubbedFile {
            path: "/home/ada/.npmrc".into(),
            content: "registry=https://registry.npmjs.org/\n".into(),
        }],
        grants: vec![
            Grant::Write {
                path: "/home/ada/notes".into(),
            },
            Grant::Host {
                host: "registry.npmjs.org".into(),
                port: None,
                plain_http: false,
                tcp: false,
            },
        ],
        caches: vec![CacheLayer {
            path: "/home/ada/.npm".into(),
            upper: "/run/user/1000/efr/calls/c1/npm/upper".into(),
            work: "/run/user/1000/efr/calls/c1/npm/work".into(),
            conversation: None,
        }],
        cache_files: vec![CacheFile {
            path: "/home/ada/.cargo/.package-cache".into(),
            private: "/run/user/1000/efr/calls/c1/package-cache".into(),
        }],
        caches_read_only: vec![
            "/home/ada/.cache/pip: its layer could not be made (No space left on device)".into(),
        ],
        env: Some(vec![EnvVar {
            name: "PATH".into(),
            value: "/usr/bin:/bin".into(),
        }]),
        env_set: vec![EnvVar {
            name: "SCRATCH".into(),
            value: "/run/user/1000/efr/scratch/c1".into(),
        }],
        env_keep: vec!["NODE_ENV".into()],
        env_policy: Some(crate::envfilter::EnvPolicy {
            keep: vec!["PATH".into(), "LANG".into(), "LC_*".into()],
            drop: vec!["*_TOKEN".into()],
            secret_values: vec!["ghp_[A-Za-z0-9]{36}".into()],
        }),
        hide_sockets: false,
        require_landlock: true,
        proxy: Some(ProxyPlan {
            socket: "/run/user/1000/efr/calls/c1/proxy.sock".into(),
            relay_port: 3128,
            ports: vec![8080],
        }),
        trust: Some(TrustPlan {
            bundle: "/run/user/1000/efr/calls/c1/ca-bundle.pem".into(),
            ca: "/run/user/1000/efr/calls/c1/ca.pem".into(),
            system: vec!["/etc/ssl/certs/ca-certificates.crt".into()],
            git_config: Some("/run/user/1000/efr/calls/c1/gitconfig".into()),
        }),
        test_weaken: vec!["no_supervise".into(), "seccomp_drop=keyctl".into()],
    }
}
