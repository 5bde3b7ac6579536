//! Tests of the client against a real `hutch serve` ($HUTCH_BIN), each
//! verdict checked on the host: the files the sandbox wrote or did not,
//! the host's process table.
//!
//!     HUTCH_BIN=/path/to/hutch cargo test --offline
//!
//! Workspaces are made in $HUTCH_TEST_SCRATCH (default /var/tmp), not
//! /tmp: a command's /tmp is its own, so a host path there would prove
//! nothing. Each test starts a server of its own, and a guard stops it
//! (and its durable processes) however the test ends.

use std::env;
use std::ffi::OsString;
use std::fs::{self, DirBuilder, File};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hutch_client::json::{self, Value};
use hutch_client::{Client, DecideRequest, Error, ExecRequest, OutputStream, ProcessStartRequest};

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

const SIGTERM: i32 = 15;

/// A fresh directory in parent, of this mode.
fn make_dir(parent: &Path, prefix: &str, mode: u32) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    loop {
        let d = parent.join(format!(
            "{}{}-{}-{}",
            prefix,
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            nanos
        ));
        match DirBuilder::new().mode(mode).create(&d) {
            Ok(()) => {
                // Whatever the umask took away.
                fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
                return d;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("mkdir in {}: {}", parent.display(), e),
        }
    }
}

/// A `hutch serve` of its own, stopped when dropped: its durable
/// processes stopped, the server sent SIGTERM (SIGKILL 20 s later), its
/// directories removed.
struct Server {
    child: Option<Child>,
    base: PathBuf,
    sockdir: PathBuf,
    ws: PathBuf,
    client: Client,
}

impl Server {
    fn start() -> Server {
        Server::start_with(None, None)
    }

    /// A server whose policy is also the policy file holding policy
    /// (`--policy`), which [`Server::write_policy`] rewrites.
    fn start_with_policy(policy: &str) -> Server {
        Server::start_with(Some(policy), None)
    }

    /// A server whose approvals rules are the rules file holding rules
    /// (`--rules`), over a grants database of its own (`--grants-db`),
    /// which [`Server::grants`] keeps as the user would.
    fn start_with_rules(rules: &str) -> Server {
        Server::start_with(None, Some(rules))
    }

    fn start_with(policy: Option<&str>, rules: Option<&str>) -> Server {
        let hutch = match env::var_os("HUTCH_BIN") {
            Some(h) if !h.is_empty() => h,
            _ => panic!(
                "HUTCH_BIN is not set: set it to the hutch binary these tests run `hutch serve` of \
                 (go build -o /tmp/hutch ./cmd/hutch && HUTCH_BIN=/tmp/hutch cargo test --offline)"
            ),
        };
        let scratch = env::var_os("HUTCH_TEST_SCRATCH")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| OsString::from("/var/tmp"));
        let base = make_dir(Path::new(&scratch), "hutch-rust-", 0o755);
        // The socket's directory: only its owner may enter it, and it lies
        // in no tree a command can write (a command's /tmp is its own).
        let sockdir = make_dir(&env::temp_dir(), "hutch-rust-sock-", 0o700);
        let ws = base.join("ws");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(base.join("outside")).unwrap();
        let sock = sockdir.join("hutch.sock");
        let log = File::create(base.join("serve.log")).unwrap();
        let mut cmd = Command::new(&hutch);
        cmd.arg("serve")
            .arg("--socket")
            .arg(&sock)
            .arg("--workspace")
            .arg(&ws)
            .args(["--kill-after", "2s", "--data-dir"])
            .arg(base.join("data"));
        if let Some(policy) = policy {
            let file = base.join("policy.toml");
            fs::write(&file, policy).unwrap();
            cmd.arg("--policy").arg(file);
        }
        // Apart from the workspace: the server refuses a database in a
        // directory that holds a tree its commands write.
        cmd.arg("--grants-db")
            .arg(base.join("grants").join("grants.db"));
        if let Some(rules) = rules {
            let file = base.join("rules.toml");
            fs::write(&file, rules).unwrap();
            cmd.arg("--rules").arg(file);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{:?} serve: {}", hutch, e));
        let mut srv = Server {
            child: Some(child),
            base,
            sockdir,
            ws,
            client: Client::new(&sock).with_timeout(Some(Duration::from_secs(120))),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match srv.client.health() {
                Ok(_) => return srv,
                Err(e) => {
                    let exited = srv.child.as_mut().unwrap().try_wait().unwrap();
                    if exited.is_some() || Instant::now() > deadline {
                        panic!(
                            "hutch serve did not come up ({}; exited: {:?}):\n{}",
                            e,
                            exited,
                            srv.log()
                        );
                    }
                    thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.base.join("serve.log")).unwrap_or_default()
    }

    fn host(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }

    /// Runs `PREFIX echo x > OUTSIDE/NAME`, a write outside the
    /// workspace, and fails unless the command failed and the host has
    /// no such file.
    fn assert_exec_write_refused(&self, prefix: &str, name: &str) {
        let outside = self.base.join("outside").join(name);
        let out = self
            .client
            .exec(&ExecRequest::command(format!(
                "{}echo x > {}",
                prefix,
                outside.display()
            )))
            .unwrap();
        assert_ne!(out.exit_status, 0);
        assert!(
            !outside.exists(),
            "a command's write outside the workspace reached the host: {}",
            outside.display()
        );
    }

    fn ws_str(&self) -> &str {
        self.ws.to_str().unwrap()
    }

    /// Runs `hutch grants --db GRANTS_DB ARGS...` (add, decide, rules
    /// --json...) as the user would, beside the server, and returns what
    /// it printed, as JSON.
    fn grants(&self, args: &[&str]) -> Value {
        let out = Command::new(env::var_os("HUTCH_BIN").unwrap())
            .arg("grants")
            .arg("--db")
            .arg(self.base.join("grants").join("grants.db"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hutch grants {:?}: {}",
            args,
            String::from_utf8_lossy(&out.stderr)
        );
        json::parse_bytes(&out.stdout).unwrap()
    }

    /// Replaces the policy file as an editor saves one: a new file
    /// renamed over the old.
    fn write_policy(&self, policy: &str) {
        let tmp = self.base.join("policy.toml.tmp");
        fs::write(&tmp, policy).unwrap();
        fs::rename(&tmp, self.base.join("policy.toml")).unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(None) = child.try_wait() {
                // Durable processes outlive their server: stop them first.
                let _ = self
                    .client
                    .clone()
                    .with_timeout(Some(Duration::from_secs(30)))
                    .stop_all_processes();
                // SAFETY: kill(2) on our own child's pid, not yet reaped.
                unsafe {
                    kill(child.id() as i32, SIGTERM);
                }
                let deadline = Instant::now() + Duration::from_secs(20);
                while let Ok(None) = child.try_wait() {
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        break;
                    }
                    thread::sleep(Duration::from_millis(20));
                }
                let _ = child.wait();
            }
        }
        if thread::panicking() {
            eprintln!("hutch serve's log:\n{}", self.log());
        }
        let _ = fs::remove_dir_all(&self.base);
        let _ = fs::remove_dir_all(&self.sockdir);
    }
}

#[test]
fn health_and_version() {
    let srv = Server::start();
    let h = srv.client.health().unwrap();
    assert_eq!(
        (h.status.as_str(), h.workspace.as_str()),
        ("ok", srv.ws_str())
    );
    let v = srv.client.version().unwrap();
    assert_eq!(v.protocol, hutch_client::PROTOCOL_VERSION);
}

#[test]
fn exec_writes_a_file_the_host_sees() {
    let srv = Server::start();
    let out = srv
        .client
        .exec(&ExecRequest::command(
            "printf 'made by rust\\n' > from-exec.txt",
        ))
        .unwrap();
    assert_eq!(out.exit_status, 0, "{:?}", out);
    assert_eq!(
        fs::read_to_string(srv.host("from-exec.txt")).unwrap(),
        "made by rust\n"
    );

    // argv, cwd, and an env value of every kind of character: what the
    // serializer escaped, the server read back as it was.
    fs::create_dir(srv.host("sub")).unwrap();
    let greeting = "h\u{e9}llo \u{2603} \u{1f600} \t\"q\" \\ \u{1}\u{7f}\u{2028}";
    let out = srv
        .client
        .exec(
            &ExecRequest::argv(["sh", "-c", "printf %s \"$GREETING\" > greeting.txt; pwd"])
                .cwd("sub")
                .env("GREETING", greeting),
        )
        .unwrap();
    assert_eq!(out.exit_status, 0, "{:?}", out);
    assert_eq!(
        fs::read_to_string(srv.host("sub/greeting.txt")).unwrap(),
        greeting
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{}/sub\n", srv.ws_str())
    );
    assert_eq!(out.result["exit_code"].as_i64(), Some(0));
    assert!(!out.killed());
}

#[test]
fn explain_adds_the_refusals_to_stderr() {
    // A write outside the workspace: its refusal is in the result's
    // denials, and with explain on the command's stderr after its own
    // output too.
    let srv = Server::start();
    let outside = srv.base.join("outside").join("explained.txt");
    let path = outside.to_str().unwrap();
    for explain in [false, true] {
        let mut req = ExecRequest::argv(["touch", path]);
        if explain {
            req = req.explain();
        }
        let out = srv.client.exec(&req).unwrap();
        let denials: Vec<(String, String, String)> = out.result["denials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let s = |k: &str| d[k].as_str().unwrap_or_default().to_string();
                (s("op"), s("object"), s("rule"))
            })
            .collect();
        assert_eq!(
            denials,
            [(
                "write".to_string(),
                path.to_string(),
                "outside-writable".to_string()
            )]
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let touched = format!("touch: cannot touch '{}': Read-only file system\n", path);
        assert!(stderr.starts_with(&touched), "{}", stderr);
        assert_eq!(
            stderr[touched.len()..].starts_with(&format!("hutch: refused write {}: ", path)),
            explain,
            "{}",
            stderr
        );
        assert!(
            !outside.exists(),
            "a write outside the workspace reached the host"
        );
    }
}

#[test]
fn output_bytes_come_back_exact() {
    let srv = Server::start();
    let out = srv
        .client
        .exec(&ExecRequest::command(
            "printf '\\377\\000a'; printf 'e\\376' >&2",
        ))
        .unwrap();
    assert_eq!(out.exit_status, 0);
    assert_eq!(out.stdout, b"\xff\x00a");
    assert_eq!(out.stderr, b"e\xfe");

    // A megabyte of random bytes, in many chunks, text and base64 mixed,
    // is the file the command wrote, byte for byte; and the callback saw
    // every chunk, in order, as the output holds them.
    let mut seen = (Vec::new(), Vec::new());
    let out = srv
        .client
        .exec_streaming(
            &ExecRequest::command("head -c 1000000 /dev/urandom | tee rand.bin; echo done >&2"),
            |stream, data| match stream {
                OutputStream::Stdout => seen.0.extend_from_slice(data),
                OutputStream::Stderr => seen.1.extend_from_slice(data),
            },
        )
        .unwrap();
    assert_eq!(
        out.exit_status,
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let host = fs::read(srv.host("rand.bin")).unwrap();
    assert_eq!(host.len(), 1_000_000);
    assert!(
        out.stdout == host,
        "stdout differs from the file the command wrote"
    );
    assert!(
        seen.0 == host,
        "the chunks seen differ from the file the command wrote"
    );
    assert_eq!(
        (out.stderr.as_slice(), seen.1.as_slice()),
        (&b"done\n"[..], &b"done\n"[..])
    );
}

#[test]
fn binary_stdin_reaches_the_command() {
    let srv = Server::start();
    let mut data: Vec<u8> = (0..=255u8).cycle().take(256 * 64).collect();
    data.extend_from_slice(b"\xff\xfe\x00end");
    let out = srv
        .client
        .exec(&ExecRequest::argv(["sh", "-c", "cat > stdin.bin"]).stdin(data.clone()))
        .unwrap();
    assert_eq!(out.exit_status, 0, "{:?}", out);
    assert!(
        fs::read(srv.host("stdin.bin")).unwrap() == data,
        "the host file differs from the stdin sent"
    );

    // A command that writes a megabyte before it reads its stdin: the
    // stdin is written while the output is read, or neither side moves.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let out = srv
        .client
        .exec(&ExecRequest::command("head -c 1000000 /dev/zero; cat > big.bin").stdin(big.clone()))
        .unwrap();
    assert_eq!(
        out.exit_status,
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), 1_000_000);
    assert!(
        fs::read(srv.host("big.bin")).unwrap() == big,
        "the host file differs from the stdin sent"
    );

    // A command that reads none of it ends all the same.
    let out = srv
        .client
        .exec(&ExecRequest::command("exit 4").stdin(big))
        .unwrap();
    assert_eq!(out.exit_status, 4);
}

#[test]
fn exit_statuses() {
    let srv = Server::start();
    assert_eq!(
        srv.client
            .exec(&ExecRequest::argv(["sh", "-c", "exit 3"]))
            .unwrap()
            .exit_status,
        3
    );
    let out = srv
        .client
        .exec(&ExecRequest::argv(["no-such-command-here"]))
        .unwrap();
    assert_eq!(out.exit_status, 127, "{:?}", out);
    assert_eq!(
        srv.client
            .exec(&ExecRequest::command("kill -9 $$"))
            .unwrap()
            .exit_status,
        137
    );
    // The server's refusal of a request, named by its field.
    match srv.client.exec(&ExecRequest::command("true").cwd("/etc")) {
        Err(Error::Api {
            status: 400, field, ..
        }) => assert_eq!(field.as_deref(), Some("cwd")),
        other => panic!("{:?}", other),
    }
    // An empty argv is refused before anything is sent.
    assert!(matches!(
        srv.client.exec(&ExecRequest::argv(Vec::<String>::new())),
        Err(Error::InvalidRequest { .. })
    ));
}

#[test]
fn files_through_the_door() {
    let srv = Server::start();
    // A write in the workspace lands on the host, bytes as they are.
    let path = srv.host("door.bin");
    let data = b"\x00\xffbinary\xfe\n".to_vec();
    let info = srv.client.write(path.to_str().unwrap(), &data).unwrap();
    assert_eq!(info.host_path, path.to_str().unwrap());
    assert!(info.is_file());
    assert_eq!(fs::read(&path).unwrap(), data);
    let rd = srv.client.read("door.bin").unwrap();
    assert_eq!(rd.content, data);
    assert!(rd.eof);

    // Outside the workspace: refused, and nothing appears on the host.
    let etc = format!("/etc/hutch-rust-test-{}", std::process::id());
    assert!(!Path::new(&etc).exists(), "{} exists before the test", etc);
    for target in [
        etc,
        srv.base
            .join("outside/door.txt")
            .to_str()
            .unwrap()
            .to_string(),
    ] {
        match srv.client.write(&target, b"x") {
            Err(Error::Api { status: 403, .. }) => {}
            other => panic!("write {}: {:?}", target, other),
        }
        assert!(
            !Path::new(&target).exists(),
            "a write outside the workspace reached the host: {}",
            target
        );
    }
    // And through a command: the file is not made either.
    srv.assert_exec_write_refused("", "exec.txt");
}

#[test]
fn stat_and_list() {
    let srv = Server::start();
    fs::create_dir(srv.host("adir")).unwrap();
    fs::set_permissions(srv.host("adir"), fs::Permissions::from_mode(0o750)).unwrap();
    fs::write(srv.host("adir/f.txt"), "12345").unwrap();
    fs::set_permissions(srv.host("adir/f.txt"), fs::Permissions::from_mode(0o640)).unwrap();

    let st = srv.client.stat("adir").unwrap();
    assert_eq!(st.file_type, "dir");
    assert!(st.is_dir());
    assert_eq!(st.mode & 0o170000, 0o040000, "mode {:o}", st.mode);
    // The mode is the host's st_mode.
    let host_mode = fs::metadata(srv.host("adir")).unwrap().permissions().mode();
    assert_eq!(
        st.mode, host_mode,
        "mode {:o}, host {:o}",
        st.mode, host_mode
    );
    assert_eq!(st.permissions(), 0o750);

    let st = srv.client.stat("adir/f.txt").unwrap();
    assert_eq!(
        (st.file_type.as_str(), st.mode, st.size),
        ("file", 0o100640, 5)
    );

    let entries = srv.client.list("adir").unwrap();
    assert_eq!(entries.len(), 1, "{:?}", entries);
    assert_eq!(
        entries[0].host_path,
        srv.host("adir/f.txt").to_str().unwrap()
    );
    let root = srv.client.list(".").unwrap();
    let adir = root
        .iter()
        .find(|e| e.host_path == srv.host("adir").to_str().unwrap())
        .expect("adir in the workspace's listing");
    assert!(adir.is_dir() && adir.mode == 0o040750, "{:?}", adir);

    match srv.client.stat("no-such-file") {
        Err(Error::Api { status: 404, .. }) => {}
        other => panic!("{:?}", other),
    }
}

/// Whether pid is alive on the host (not a zombie) and runs sleep
/// with arg.
fn sleeping(pid: i64, arg: &str) -> bool {
    let cmdline = fs::read(format!("/proc/{}/cmdline", pid)).unwrap_or_default();
    let stat = fs::read_to_string(format!("/proc/{}/stat", pid)).unwrap_or_default();
    let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
    cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes())
        && state.map_or(false, |s| s != 'Z' && s != 'X')
}

#[test]
fn durable_process_start_and_stop() {
    let srv = Server::start();
    let arg = format!("{}", 3000 + std::process::id() % 1000);
    let p = srv
        .client
        .start_process(
            &ProcessStartRequest::command(format!("echo started > proc.txt; exec sleep {}", arg))
                .name("rust-test")
                .restart("never"),
        )
        .unwrap();
    assert_eq!(p.name.as_deref(), Some("rust-test"));

    // It runs: its file appears on the host, its sleep is in the host's
    // process table.
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        let got = srv.client.get_process(&p.id).unwrap();
        if let Some(pid) = got.pid {
            if got.status == "running" && sleeping(pid, &arg) && srv.host("proc.txt").exists() {
                break pid;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the process did not come up: {:?}",
            got
        );
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        fs::read_to_string(srv.host("proc.txt")).unwrap(),
        "started\n"
    );
    assert!(srv
        .client
        .list_processes()
        .unwrap()
        .iter()
        .any(|q| q.id == p.id));
    // Running, it cannot be removed.
    match srv.client.remove_process(&p.id) {
        Err(Error::Api {
            status: 409, code, ..
        }) => assert_eq!(code, "active"),
        other => panic!("{:?}", other),
    }

    // Stopped, it is gone from the host.
    let stopped = srv.client.stop_process(&p.id).unwrap();
    assert_ne!(stopped.status, "running", "{:?}", stopped);
    assert!(
        !sleeping(pid, &arg),
        "pid {} still runs sleep {} after the stop",
        pid,
        arg
    );
    srv.client.remove_process(&p.id).unwrap();
    assert!(!srv
        .client
        .list_processes()
        .unwrap()
        .iter()
        .any(|q| q.id == p.id));
    match srv.client.get_process(&p.id) {
        Err(Error::Api { status: 404, .. }) => {}
        other => panic!("{:?}", other),
    }
}

/// A TOML basic string of a path with nothing to escape.
fn toml_path(p: &Path) -> String {
    let s = p.to_str().unwrap();
    assert!(
        !s.contains(|c: char| c == '"' || c == '\\' || c.is_control()),
        "{:?}",
        s
    );
    format!("\"{}\"", s)
}

/// The strings of a policy's list field (`null`: none).
fn policy_list(p: &hutch_client::ServerPolicy, key: &str) -> Vec<String> {
    if p.policy[key].is_null() {
        return Vec::new();
    }
    p.policy[key]
        .as_array()
        .unwrap_or_else(|| panic!("the policy's {} is {}", key, p.policy[key]))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn policy_and_reload_of_a_policy_file() {
    let srv =
        Server::start_with_policy("version = 1\n[sandbox]\nenv = [\"HUTCH_RS_PHASE=before\"]\n");
    let outside = srv.base.join("outside");
    let p = srv.client.policy().unwrap();
    assert_eq!(
        p.policy["Workspace"].as_str(),
        Some(srv.ws_str()),
        "{}",
        p.raw
    );
    assert_eq!(policy_list(&p, "Env"), ["HUTCH_RS_PHASE=before"]);
    assert_eq!(policy_list(&p, "Writable"), Vec::<String>::new());
    assert_eq!((p.kill_after_ms, p.grantable.len()), (2000, 0), "{}", p.raw);

    // Each command writes, on the host, the phase of the policy it ran
    // under, and tries to write outside the workspace: check holds what
    // the host then has to what that policy says.
    let check = |tag: &str, phase: &str, writes_outside: bool| {
        let out = srv
            .client
            .exec(&ExecRequest::command(format!(
                "echo \"$HUTCH_RS_PHASE\" > phase-{tag}.txt; echo {tag} > {}/{tag}.txt",
                outside.display(),
                tag = tag
            )))
            .unwrap();
        let seen = (
            out.exit_status == 0,
            fs::read_to_string(srv.host(&format!("phase-{}.txt", tag))).ok(),
            fs::read_to_string(outside.join(format!("{}.txt", tag))).ok(),
        );
        let want = (
            writes_outside,
            Some(format!("{}\n", phase)),
            if writes_outside {
                Some(format!("{}\n", tag))
            } else {
                None
            },
        );
        assert_eq!(
            seen,
            want,
            "command {}: {}",
            tag,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    check("1", "before", false);

    // Changed, the file is not in effect until a reload.
    srv.write_policy(&format!(
        "version = 1\n[sandbox]\nenv = [\"HUTCH_RS_PHASE=after\"]\nwritable = [{}]\n",
        toml_path(&outside)
    ));
    assert_eq!(srv.client.policy().unwrap(), p);
    check("2", "before", false);

    let r = srv.client.reload().unwrap();
    assert_eq!(
        (r.status.as_str(), r.workspace.as_str()),
        ("reloaded", srv.ws_str())
    );
    let p = srv.client.policy().unwrap();
    assert_eq!(policy_list(&p, "Env"), ["HUTCH_RS_PHASE=after"]);
    assert_eq!(
        policy_list(&p, "Writable"),
        [outside.to_str().unwrap().to_string()]
    );
    check("3", "after", true);

    // A policy that does not build is refused, with the API's error, and
    // the one in effect stays: in the answer and on the host.
    srv.write_policy("version = 1\n[sandbox]\nmemory = \"1k\"\n");
    match srv.client.reload() {
        Err(Error::Api {
            status: 400,
            code,
            message,
            ..
        }) => assert!(
            code == "bad_request" && message.contains("Memory"),
            "{}: {}",
            code,
            message
        ),
        other => panic!("{:?}", other),
    }
    // So is a file that does not parse.
    srv.write_policy("version = 1\n[sandbox]\nno_such_key = 1\n");
    match srv.client.reload() {
        Err(Error::Api { message, .. }) => {
            assert!(message.contains("no_such_key"), "{}", message)
        }
        other => panic!("{:?}", other),
    }
    assert_eq!(srv.client.policy().unwrap(), p);
    check("4", "after", true);
}

#[test]
fn policy_and_reload_without_a_policy_file() {
    // The server's flags are its policy: GET /v1/policy answers them, and
    // a reload reads them again, changing nothing.
    let srv = Server::start();
    let p = srv.client.policy().unwrap();
    assert_eq!(
        p.policy["Workspace"].as_str(),
        Some(srv.ws_str()),
        "{}",
        p.raw
    );
    assert_eq!(p.policy["Network"].as_str(), Some("none"), "{}", p.raw);
    assert_eq!(
        (
            policy_list(&p, "Env"),
            policy_list(&p, "Writable"),
            p.kill_after_ms,
            p.grantable.len()
        ),
        (Vec::new(), Vec::new(), 2000, 0),
        "{}",
        p.raw
    );
    let r = srv.client.reload().unwrap();
    assert_eq!(
        (r.status.as_str(), r.workspace.as_str()),
        ("reloaded", srv.ws_str())
    );
    assert_eq!(srv.client.policy().unwrap(), p);
    srv.assert_exec_write_refused("echo x > after-reload.txt; ", "after-reload.txt");
    assert!(srv.host("after-reload.txt").exists());
}

#[test]
fn approvals_decide_as_the_cli() {
    // The server judges calls as hutch grants decide does, by its --rules
    // and the grants the user remembers meanwhile (read on every call).
    let srv = Server::start_with_rules("[tools.write]\ndecision = \"prompt\"\n");
    let ws = srv.ws_str().to_string();
    let rules = srv.base.join("rules.toml");
    let rules = rules.to_str().unwrap();
    let scope = ["--agent", "coder", "--workspace", ws.as_str()];
    let call = |tool: &str, arg: &str| {
        DecideRequest::new(tool, arg)
            .agent("coder")
            .workspace(ws.as_str())
    };
    let before = srv.client.decide(&call("bash", "npm test && ls")).unwrap();
    assert_eq!(before.decision, "prompt", "{}", before.raw);
    for (tool, pattern, decision) in [
        ("bash", "npm test*", "allow"),
        ("bash", "ls", "allow"),
        ("bash", "sudo *", "deny"),
        ("write", "src/*", "allow"),
        ("write", ".env", "deny"),
    ] {
        let mut args = vec![
            "add",
            "--tool",
            tool,
            "--pattern",
            pattern,
            "--decision",
            decision,
        ];
        args.extend(scope);
        srv.grants(&args);
    }
    for (tool, arg, want) in [
        ("bash", "npm test && ls", "allow"),
        ("bash", "npm test; rm -rf ~", "prompt"),
        ("bash", "ls; sudo rm -rf /", "deny"),
        ("bash", "echo $(sudo id)", "deny"),
        ("write", "src/main.rs", "allow"),
        ("write", ".env", "deny"),
        ("read_file", "/etc/passwd", "allow"),
    ] {
        let v = srv.client.decide(&call(tool, arg)).unwrap();
        let mut args = vec!["decide", "--rules", rules, "--tool", tool, "--arg", arg];
        args.extend(scope);
        assert_eq!(v.raw, srv.grants(&args), "{} {:?}", tool, arg);
        assert_eq!(v.decision, want, "{} {:?}: {}", tool, arg, v.raw);
    }
    let both = srv.client.decide(&call("bash", "npm test && ls")).unwrap();
    assert_eq!(
        (both.grants.len(), both.grant),
        (2, both.grants.first().copied())
    );
    // The grants are coder's, in this workspace.
    let other = DecideRequest::new("bash", "npm test")
        .agent("other")
        .workspace(ws.as_str());
    assert_eq!(srv.client.decide(&other).unwrap().decision, "prompt");

    // The rules, as hutch grants rules --json prints them.
    let listed = srv.client.approval_rules().unwrap();
    let cli = srv.grants(&["rules", "--rules", rules, "--json"]);
    assert_eq!(
        Value::from(listed.iter().map(|r| r.raw.clone()).collect::<Vec<_>>()),
        cli
    );
    assert!(listed
        .iter()
        .any(|r| r.tool == "write" && r.decision == "prompt" && !r.shell));

    // A call without a tool is the request's fault, naming the field.
    match srv.client.decide(&DecideRequest::new("", "ls")) {
        Err(Error::Api {
            status: 400,
            ref code,
            ref field,
            ..
        }) if code == "bad_request" && field.as_deref() == Some("tool") => {}
        other => panic!("a call without a tool: {:?}", other),
    }
}
