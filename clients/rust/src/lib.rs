//! A client of hutch's local API (`hutch serve`), the standard library
//! only: JSON over HTTP/1.1 on a unix socket.
//!
//! ```no_run
//! use hutch_client::{Client, ExecRequest};
//!
//! let client = Client::new("/run/user/1000/hutch/hutch.sock");
//! let out = client.exec(&ExecRequest::command("make test").cwd("src").env("CI", "1").timeout_ms(60_000))?;
//! println!("exit {}: {}", out.exit_status, String::from_utf8_lossy(&out.stdout));
//! let notes = client.read("notes.md")?;
//! client.write("/path/to/workspace/out.bin", &[0, 1, 2])?;
//! # Ok::<(), hutch_client::Error>(())
//! ```
//!
//! Every call is one connection. A refusal of the server is an
//! [`Error::Api`] with its HTTP status and the API's `code`, `message`
//! and `field`; a request this client will not send (an empty `argv`) is
//! an [`Error::InvalidRequest`], and nothing is sent. The protocol is
//! hutch's `docs/local-api.md`; answers not modelled here are at hand as
//! [`json::Value`]s (each typed answer keeps its `raw` object).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod base64;
mod http;
pub mod json;

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use json::Value;

/// The protocol version this client speaks: the N of the API's `/vN/`.
pub const PROTOCOL_VERSION: i64 = 1;

/// The largest answer (other than an exec's stream) read: the server
/// caps a request at 32 MiB, and a read's content travels as base64.
const MAX_ANSWER: u64 = 256 << 20;
/// The longest line of an exec's stream read.
const MAX_EVENT: u64 = 64 << 20;

// ---------------------------------------------------------------------------
// Errors

/// What went wrong with a call.
#[derive(Debug)]
pub enum Error {
    /// The server refused the request: an answer with an error status.
    Api {
        /// The HTTP status: 400 the request's fault, 403 refused, 404, 409...
        status: u16,
        /// The API's word for it: `bad_request`, `bad_path`, `denied`,
        /// `private`, `leak`, `not_found`, `not_permitted`, `active`,
        /// `too_large`, `unavailable`, `internal`... (`http` when the
        /// answer carried no API error).
        code: String,
        /// What is wrong, in the server's words.
        message: String,
        /// The request's field at fault, when the server named one.
        field: Option<String>,
    },
    /// The socket failed: no server, refused, reset, timed out.
    Io(io::Error),
    /// The server's answer was not what the protocol says: not HTTP, not
    /// JSON, a field missing, a stream ending before its result.
    Protocol(String),
    /// A request this client refused to send (nothing was sent).
    InvalidRequest {
        /// The request's field at fault, as the API names it (`argv`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl Error {
    /// The HTTP status of an [`Error::Api`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API's code of an [`Error::Api`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api {
                status,
                code,
                message,
                field,
            } => {
                write!(f, "hutch: {} {}: ", status, code)?;
                if let Some(field) = field {
                    write!(f, "{}: ", field)?;
                }
                f.write_str(message)
            }
            Error::Io(e) => write!(f, "hutch: {}", e),
            Error::Protocol(m) => write!(f, "hutch: protocol: {}", m),
            Error::InvalidRequest { field, message } => {
                write!(f, "hutch: invalid request: {}: {}", field, message)
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

/// An error of reading an answer: broken framing and an answer cut
/// short are the protocol's, the rest the socket's.
fn read_error(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => Error::Protocol(e.to_string()),
        _ => Error::Io(e),
    }
}

fn protocol<T>(msg: String) -> Result<T, Error> {
    Err(Error::Protocol(msg))
}

fn invalid<T>(field: &str, message: &str) -> Result<T, Error> {
    Err(Error::InvalidRequest {
        field: field.to_string(),
        message: message.to_string(),
    })
}

// ---------------------------------------------------------------------------
// Requests

/// What a command is, in an exec or a durable process's start: exactly
/// one of argv and command, and what the call is granted.
struct CommandFields<'a> {
    argv: Option<&'a [String]>,
    command: Option<&'a str>,
    cwd: Option<&'a str>,
    env: &'a BTreeMap<String, String>,
    allowed_domains: &'a [String],
    package_managers: &'a [String],
    grant: &'a [String],
    publish: &'a [String],
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect())
}

impl CommandFields<'_> {
    /// The request's fields, checked as far as this client can: the
    /// server checks the rest.
    fn body(&self) -> Result<BTreeMap<String, Value>, Error> {
        let mut m = BTreeMap::new();
        match (self.argv, self.command) {
            (Some(_), Some(_)) => return invalid("command", "give argv or command, not both"),
            (None, None) => return invalid("argv", "missing: give argv or command"),
            (Some(argv), None) => {
                if argv.is_empty() {
                    return invalid("argv", "empty: give at least the program to run");
                }
                if argv[0].is_empty() {
                    return invalid("argv", "argv[0] is empty");
                }
                m.insert("argv".to_string(), strings(argv));
            }
            (None, Some(command)) => {
                if command.is_empty() {
                    return invalid("command", "empty");
                }
                m.insert("command".to_string(), Value::from(command));
            }
        }
        if let Some(cwd) = self.cwd {
            m.insert("cwd".to_string(), Value::from(cwd));
        }
        if !self.env.is_empty() {
            m.insert(
                "env".to_string(),
                Value::Object(
                    self.env
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                        .collect(),
                ),
            );
        }
        for (k, v) in [
            ("allowed_domains", self.allowed_domains),
            ("package_managers", self.package_managers),
            ("grant", self.grant),
            ("publish", self.publish),
        ] {
            if !v.is_empty() {
                m.insert(k.to_string(), strings(v));
            }
        }
        Ok(m)
    }
}

/// The setters that [`ExecRequest`] and [`ProcessStartRequest`] share.
macro_rules! command_setters {
    () => {
        /// The command as its argv: no shell (`["ls", "-l"]`).
        pub fn argv<I, S>(argv: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            Self {
                argv: Some(argv.into_iter().map(Into::into).collect()),
                ..Self::default()
            }
        }

        /// The command as a shell string, run as `sh -c COMMAND`.
        pub fn command(command: impl Into<String>) -> Self {
            Self {
                command: Some(command.into()),
                ..Self::default()
            }
        }

        /// Sets the working directory, relative to the workspace (or
        /// absolute, within it).
        pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
            self.cwd = Some(cwd.into());
            self
        }

        /// Adds an environment variable.
        pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.env.insert(name.into(), value.into());
            self
        }

        /// Adds a domain the network opens to, through hutch's egress
        /// proxy (`example.com`, `*.example.com`): within the server's
        /// `--grantable` ceiling, else a 403 `not_permitted`.
        pub fn allowed_domain(mut self, domain: impl Into<String>) -> Self {
            self.allowed_domains.push(domain.into());
            self
        }

        /// Adds a package manager whose registries the network opens to
        /// (`python`, `node`...), within the server's ceiling.
        pub fn package_manager(mut self, name: impl Into<String>) -> Self {
            self.package_managers.push(name.into());
            self
        }

        /// Adds a permission tag the call is granted (`@network`,
        /// `write:/PATH`...), within the server's ceiling.
        pub fn grant(mut self, tag: impl Into<String>) -> Self {
            self.grant.push(tag.into());
            self
        }

        /// Publishes a port of the sandbox on the host's loopback:
        /// `[HOST_IP:]HOST_PORT:PORT[/tcp]`, as `hutch run --publish`
        /// reads it (HOST_PORT 0 picks a free one; the answer's
        /// `published` says which).
        pub fn publish(mut self, port: impl Into<String>) -> Self {
            self.publish.push(port.into());
            self
        }
    };
}

/// A command to run: the body of `POST /v1/exec`.
///
/// Exactly one of `argv` and `command` must be set (the constructors
/// [`ExecRequest::argv`] and [`ExecRequest::command`] set one); the rest
/// is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// The program and its arguments, run with no shell.
    pub argv: Option<Vec<String>>,
    /// A shell string, run as `sh -c`.
    pub command: Option<String>,
    /// The working directory, relative to the workspace.
    pub cwd: Option<String>,
    /// Environment variables added to the sandbox's.
    pub env: BTreeMap<String, String>,
    /// The command's stdin, bytes as they are (streamed after the
    /// request: the API's `Hutch-Stdin: stream`). `None`: no stdin.
    pub stdin: Option<Vec<u8>>,
    /// Stops the command after this many milliseconds (SIGTERM, then
    /// SIGKILL after the server's `--kill-after`). `None`: the server's
    /// policy alone.
    pub timeout_ms: Option<u64>,
    /// Domains the network opens to, within the server's ceiling.
    pub allowed_domains: Vec<String>,
    /// Package managers whose registries the network opens to.
    pub package_managers: Vec<String>,
    /// Permission tags granted beyond the server's policy.
    pub grant: Vec<String>,
    /// Ports of the sandbox reachable on the host's loopback, each
    /// `[HOST_IP:]HOST_PORT:PORT[/tcp]`; the host ports chosen are in the
    /// answer's `published` (an exec's result, a process's record).
    pub publish: Vec<String>,
    /// Durable processes' ports the command reaches, each `ID:PORT` as
    /// `hutch run --reach` reads it: its `localhost:PORT` leads to the
    /// process's published port; nothing else of the network opens.
    pub reach: Vec<String>,
    /// Appends to the command's stderr, after its own output, a few
    /// lines naming what it was refused, by which rule, and how to allow
    /// each (`hutch: refused ...`); the result's `denials` hold them
    /// either way.
    pub explain: bool,
}

impl ExecRequest {
    command_setters!();

    /// Adds a durable process's port the command reaches as its own
    /// `localhost:PORT`: `ID:PORT`, as `hutch run --reach` reads it.
    pub fn reach(mut self, target: impl Into<String>) -> Self {
        self.reach.push(target.into());
        self
    }

    /// Sets the command's stdin.
    pub fn stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    /// Sets the timeout, in milliseconds.
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Has the server append the command's refusals to its stderr.
    pub fn explain(mut self) -> Self {
        self.explain = true;
        self
    }

    fn body(&self) -> Result<Value, Error> {
        let mut m = CommandFields {
            argv: self.argv.as_deref(),
            command: self.command.as_deref(),
            cwd: self.cwd.as_deref(),
            env: &self.env,
            allowed_domains: &self.allowed_domains,
            package_managers: &self.package_managers,
            grant: &self.grant,
            publish: &self.publish,
        }
        .body()?;
        if let Some(ms) = self.timeout_ms {
            m.insert("timeout_ms".to_string(), Value::from(ms));
        }
        if !self.reach.is_empty() {
            m.insert("reach".to_string(), strings(&self.reach));
        }
        if self.explain {
            m.insert("explain".to_string(), Value::Bool(true));
        }
        Ok(Value::Object(m))
    }
}

/// A durable process to start: the body of `POST /v1/processes/start`.
/// It runs under the server's policy (and the call's grant), and
/// outlives the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessStartRequest {
    /// The program and its arguments, run with no shell.
    pub argv: Option<Vec<String>>,
    /// A shell string, run as `sh -c`.
    pub command: Option<String>,
    /// The working directory, relative to the workspace.
    pub cwd: Option<String>,
    /// Environment variables added to the sandbox's.
    pub env: BTreeMap<String, String>,
    /// A name for it, to find it by.
    pub name: Option<String>,
    /// `always` (the server's default), `on-failure` or `never`.
    pub restart: Option<String>,
    /// Domains the network opens to, within the server's ceiling.
    pub allowed_domains: Vec<String>,
    /// Package managers whose registries the network opens to.
    pub package_managers: Vec<String>,
    /// Permission tags granted beyond the server's policy.
    pub grant: Vec<String>,
    /// Ports of the sandbox reachable on the host's loopback, each
    /// `[HOST_IP:]HOST_PORT:PORT[/tcp]`; the host ports chosen are in the
    /// answer's `published` (an exec's result, a process's record).
    pub publish: Vec<String>,
    /// Appends to the process's log, at the end of each run, a few lines
    /// naming what it was refused (`hutch: refused ...`); the record's
    /// `runs` hold them either way.
    pub explain: bool,
}

impl ProcessStartRequest {
    command_setters!();

    /// Sets its name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets its restart policy: `always`, `on-failure` or `never`.
    pub fn restart(mut self, restart: impl Into<String>) -> Self {
        self.restart = Some(restart.into());
        self
    }

    /// Has the server append each run's refusals to the process's log.
    pub fn explain(mut self) -> Self {
        self.explain = true;
        self
    }

    fn body(&self) -> Result<Value, Error> {
        let mut m = CommandFields {
            argv: self.argv.as_deref(),
            command: self.command.as_deref(),
            cwd: self.cwd.as_deref(),
            env: &self.env,
            allowed_domains: &self.allowed_domains,
            package_managers: &self.package_managers,
            grant: &self.grant,
            publish: &self.publish,
        }
        .body()?;
        if let Some(name) = &self.name {
            m.insert("name".to_string(), Value::from(name.as_str()));
        }
        if let Some(restart) = &self.restart {
            m.insert("restart".to_string(), Value::from(restart.as_str()));
        }
        if self.explain {
            m.insert("explain".to_string(), Value::Bool(true));
        }
        Ok(Value::Object(m))
    }
}

/// A file to read: the body of `POST /v1/files/read`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadRequest {
    /// The path: relative to the workspace, or absolute as a command of
    /// the sandbox names it.
    pub path: String,
    /// The first byte to read.
    pub offset: Option<u64>,
    /// The most bytes to read (`None`: the server's default).
    pub limit: Option<u64>,
    /// `text` or `binary` (`None`: detected).
    pub mode: Option<String>,
    /// Refuse a path whose last component is a symlink.
    pub no_follow: bool,
}

impl ReadRequest {
    /// A read of path, whole.
    pub fn new(path: impl Into<String>) -> Self {
        ReadRequest {
            path: path.into(),
            ..ReadRequest::default()
        }
    }

    fn body(&self) -> Value {
        let mut m = BTreeMap::new();
        m.insert("path".to_string(), Value::from(self.path.as_str()));
        if let Some(n) = self.offset {
            m.insert("offset".to_string(), Value::from(n));
        }
        if let Some(n) = self.limit {
            m.insert("limit".to_string(), Value::from(n));
        }
        if let Some(mode) = &self.mode {
            m.insert("mode".to_string(), Value::from(mode.as_str()));
        }
        if self.no_follow {
            m.insert("no_follow".to_string(), Value::Bool(true));
        }
        Value::Object(m)
    }
}

/// A tool call to judge: the body of `POST /v1/approvals/decide`, as
/// `hutch grants decide`'s flags say it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecideRequest {
    /// The tool called (`bash`, `read_file`...).
    pub tool: String,
    /// Its argument: a shell tool's command line (judged command by
    /// command), a file tool's path.
    pub arg: String,
    /// The calling agent (remembered grants are per agent).
    pub agent: String,
    /// The workspace the call acts in (remembered grants are per
    /// workspace).
    pub workspace: String,
}

impl DecideRequest {
    /// A call of tool with argument arg, by no named agent, in no named
    /// workspace.
    pub fn new(tool: impl Into<String>, arg: impl Into<String>) -> Self {
        DecideRequest {
            tool: tool.into(),
            arg: arg.into(),
            ..DecideRequest::default()
        }
    }

    /// The calling agent.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = agent.into();
        self
    }

    /// The workspace the call acts in.
    pub fn workspace(mut self, workspace: impl Into<String>) -> Self {
        self.workspace = workspace.into();
        self
    }

    fn body(&self) -> Value {
        let mut m = BTreeMap::new();
        m.insert("tool".to_string(), Value::from(self.tool.as_str()));
        for (key, v) in [
            ("arg", &self.arg),
            ("agent", &self.agent),
            ("workspace", &self.workspace),
        ] {
            if !v.is_empty() {
                m.insert(key.to_string(), Value::from(v.as_str()));
            }
        }
        Value::Object(m)
    }
}

/// A file to write: the body of `POST /v1/files/write`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteRequest {
    /// The path, as for a read.
    pub path: String,
    /// The bytes to write (sent as `content_base64`).
    pub content: Vec<u8>,
    /// Append to the file instead of replacing it.
    pub append: bool,
    /// The octal mode of a file the write creates (`"644"`).
    pub perm: Option<String>,
    /// Refuse a path whose last component is a symlink.
    pub no_follow: bool,
}

impl WriteRequest {
    /// A write of content to path, replacing the file.
    pub fn new(path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        WriteRequest {
            path: path.into(),
            content: content.into(),
            ..WriteRequest::default()
        }
    }

    fn body(&self) -> Value {
        let mut m = BTreeMap::new();
        m.insert("path".to_string(), Value::from(self.path.as_str()));
        m.insert(
            "content_base64".to_string(),
            Value::from(base64::encode(&self.content)),
        );
        if self.append {
            m.insert("append".to_string(), Value::Bool(true));
        }
        if let Some(perm) = &self.perm {
            m.insert("perm".to_string(), Value::from(perm.as_str()));
        }
        if self.no_follow {
            m.insert("no_follow".to_string(), Value::Bool(true));
        }
        Value::Object(m)
    }
}

// ---------------------------------------------------------------------------
// Answers

/// A member of an answer, which must be there and of its type.
fn field<'a, T>(
    v: &'a Value,
    key: &str,
    get: impl Fn(&'a Value) -> Option<T>,
    what: &str,
) -> Result<T, Error> {
    match get(&v[key]) {
        Some(x) => Ok(x),
        None => protocol(format!(
            "the answer's {:?} is {}, not {}",
            key, v[key], what
        )),
    }
}

/// A member of an answer that may be missing (or null), but is of its
/// type when there.
fn optional<'a, T>(
    v: &'a Value,
    key: &str,
    get: impl Fn(&'a Value) -> Option<T>,
    what: &str,
) -> Result<Option<T>, Error> {
    if v[key].is_null() {
        Ok(None)
    } else {
        field(v, key, get, what).map(Some)
    }
}

/// `GET /v1/health`.
#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The workspace's absolute path on the host.
    pub workspace: String,
    /// The sandbox inits kept ready.
    pub prewarmed: i64,
    /// The whole answer.
    pub raw: Value,
}

/// `GET /v1/version`.
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    /// The protocol's version, the N of `/vN/` ([`PROTOCOL_VERSION`]).
    pub protocol: i64,
    /// hutch's version.
    pub hutch_version: String,
    /// The whole answer.
    pub raw: Value,
}

/// `GET /v1/policy`: the policy the server's commands run under.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerPolicy {
    /// hutch's `runtime.Policy` as the server's flags and `--policy`
    /// file say it (the last reload's), its fields as Go names them
    /// (`Workspace`, `Writable`, `Deny`, `Env`, `Network`, `Memory`...),
    /// before what the server adds: its grant ceiling, its hidden
    /// directories, its pool.
    pub policy: Value,
    /// The grace between a stop's SIGTERM and its SIGKILL (the server's
    /// `--kill-after`), in milliseconds.
    pub kill_after_ms: i64,
    /// The ceiling of a call's grant (the server's `--grantable`), as
    /// permission tags (`@network`, `write:/PATH`...).
    pub grantable: Vec<String>,
    /// The whole answer.
    pub raw: Value,
}

impl ServerPolicy {
    fn from_value(v: Value) -> Result<ServerPolicy, Error> {
        Ok(ServerPolicy {
            policy: field(
                &v,
                "policy",
                |p| p.as_object().map(|_| p.clone()),
                "an object",
            )?,
            kill_after_ms: field(&v, "kill_after_ms", Value::as_i64, "a whole number")?,
            grantable: field(
                &v,
                "grantable",
                |g| {
                    g.as_array()?
                        .iter()
                        .map(|t| t.as_str().map(str::to_string))
                        .collect()
                },
                "an array of strings",
            )?,
            raw: v,
        })
    }
}

/// `POST /v1/policy/reload`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reloaded {
    /// `reloaded`.
    pub status: String,
    /// The workspace's absolute path on the host.
    pub workspace: String,
    /// The whole answer.
    pub raw: Value,
}

impl Reloaded {
    fn from_value(v: Value) -> Result<Reloaded, Error> {
        Ok(Reloaded {
            status: field(&v, "status", Value::as_str, "a string")?.to_string(),
            workspace: field(&v, "workspace", Value::as_str, "a string")?.to_string(),
            raw: v,
        })
    }
}

/// `POST /v1/approvals/decide`: the server's judgment of a tool call, as
/// `hutch grants decide` prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// `allow` (make the call), `deny` (refuse it) or `prompt` (ask the
    /// user; a grant they remember is theirs to add, with `hutch grants
    /// add`).
    pub decision: String,
    /// `low`, `medium` or `high`.
    pub danger: String,
    /// Why.
    pub reason: String,
    /// The remembered grant that decided, if one did.
    pub grant: Option<i64>,
    /// All those that did, when a shell call's commands were allowed by
    /// several (`grant` is the first); empty otherwise.
    pub grants: Vec<i64>,
    /// The whole answer.
    pub raw: Value,
}

impl Verdict {
    fn from_value(v: Value) -> Result<Verdict, Error> {
        let ids = |g: &Value| g.as_array()?.iter().map(Value::as_i64).collect();
        Ok(Verdict {
            decision: field(&v, "decision", Value::as_str, "a string")?.to_string(),
            danger: field(&v, "danger", Value::as_str, "a string")?.to_string(),
            reason: field(&v, "reason", Value::as_str, "a string")?.to_string(),
            grant: optional(&v, "grant", Value::as_i64, "a whole number")?,
            grants: optional(&v, "grants", ids, "an array of whole numbers")?.unwrap_or_default(),
            raw: v,
        })
    }
}

/// A tool's rule, of `GET /v1/approvals/rules` (`hutch grants rules
/// --json`).
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRule {
    /// The tool's name.
    pub tool: String,
    /// `allow`, `prompt` or `deny`.
    pub decision: String,
    /// `low`, `medium` or `high`.
    pub danger: String,
    /// The tool's argument is a command line, judged command by command.
    pub shell: bool,
    /// The whole row.
    pub raw: Value,
}

impl ApprovalRule {
    fn from_value(v: Value) -> Result<ApprovalRule, Error> {
        Ok(ApprovalRule {
            tool: field(&v, "tool", Value::as_str, "a string")?.to_string(),
            decision: field(&v, "decision", Value::as_str, "a string")?.to_string(),
            danger: field(&v, "danger", Value::as_str, "a string")?.to_string(),
            shell: field(&v, "shell", Value::as_bool, "true or false")?,
            raw: v,
        })
    }
}

/// A finished command.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecOutput {
    /// What `hutch run` would exit with: the command's status, 128+N for
    /// signal N, 126 cannot execute, 127 not found, 125 hutch failed.
    pub exit_status: i32,
    /// Its stdout, bytes exactly as written.
    pub stdout: Vec<u8>,
    /// Its stderr, bytes exactly as written.
    pub stderr: Vec<u8>,
    /// hutch's `runtime.Result` as `hutch run --result-json` writes it
    /// (`exit_code`, `signal`, `wall_ns`, `killed`, `kill_reason`...);
    /// `Null` when the server sent none.
    pub result: Value,
    /// Why the command did not run, or what went wrong copying its
    /// output, when something did.
    pub error: Option<String>,
}

impl ExecOutput {
    /// Whether hutch killed it (a timeout, the output limit, a stop).
    pub fn killed(&self) -> bool {
        self.result["killed"].as_bool().unwrap_or(false)
    }

    /// Why it was killed (`timeout`, `output limit`...), or "".
    pub fn kill_reason(&self) -> &str {
        self.result["kill_reason"].as_str().unwrap_or("")
    }
}

/// Which of a command's outputs a chunk is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputStream {
    /// Its stdout.
    Stdout,
    /// Its stderr.
    Stderr,
}

/// `POST /v1/explain`'s answer: which rule decides a path for an access.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The path as a command's kernel would reach it, every symlink
    /// followed in the sandbox's view.
    pub view: String,
    /// Whether the access is allowed.
    pub allowed: bool,
    /// The kind of rule: `default-deny`, `deny-name`, `git-guard`,
    /// `outside-writable`, `not-in-view`, `private-tmp`...
    pub rule: String,
    /// The rule in a sentence, naming the path it is on.
    pub reason: String,
    /// The whole object as it came: `"allow"` says how to allow a
    /// refused access (`"flag"`, `"key"`, `"grant"`).
    pub raw: Value,
}

impl Explanation {
    fn from_value(v: Value) -> Result<Explanation, Error> {
        Ok(Explanation {
            view: field(&v, "view", Value::as_str, "a string")?.to_string(),
            allowed: field(&v, "allowed", Value::as_bool, "true or false")?,
            rule: field(&v, "rule", Value::as_str, "a string")?.to_string(),
            reason: field(&v, "reason", Value::as_str, "a string")?.to_string(),
            raw: v,
        })
    }
}

/// A file, as the file door sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct FileInfo {
    /// The path as a command of the sandbox names it, symlinks resolved.
    pub path: String,
    /// The same file on the host.
    pub host_path: String,
    /// `file`, `dir`, `symlink`, `fifo`, `socket`, `char_device`,
    /// `block_device` or `other`.
    pub file_type: String,
    /// Its POSIX `st_mode`: type bits, set-id and sticky bits,
    /// permissions (a directory 0o755 is 0o40755).
    pub mode: u32,
    /// Its size in bytes.
    pub size: i64,
    /// Its modification time (RFC 3339), as the server wrote it.
    pub mod_time: String,
    /// Whether a command may write it.
    pub writable: bool,
    /// In a listing: masked to commands.
    pub denied: bool,
    /// In a listing: a command sees its own filesystem there.
    pub private: bool,
    /// The whole object as it came.
    pub raw: Value,
}

impl FileInfo {
    fn from_value(v: Value) -> Result<FileInfo, Error> {
        let mode = field(&v, "mode", Value::as_u64, "a whole number")?;
        let mode = match u32::try_from(mode) {
            Ok(m) => m,
            Err(_) => return protocol(format!("the answer's \"mode\" {} is too large", mode)),
        };
        Ok(FileInfo {
            path: field(&v, "path", Value::as_str, "a string")?.to_string(),
            host_path: field(&v, "host_path", Value::as_str, "a string")?.to_string(),
            file_type: field(&v, "type", Value::as_str, "a string")?.to_string(),
            mode,
            size: field(&v, "size", Value::as_i64, "a whole number")?,
            mod_time: optional(&v, "mod_time", Value::as_str, "a string")?
                .unwrap_or("")
                .to_string(),
            writable: optional(&v, "writable", Value::as_bool, "true or false")?.unwrap_or(false),
            denied: optional(&v, "denied", Value::as_bool, "true or false")?.unwrap_or(false),
            private: optional(&v, "private", Value::as_bool, "true or false")?.unwrap_or(false),
            raw: v,
        })
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type == "dir"
    }

    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type == "file"
    }

    /// Whether it is a symlink.
    pub fn is_symlink(&self) -> bool {
        self.file_type == "symlink"
    }

    /// Its permission bits (with set-id and sticky): `mode & 0o7777`.
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// What a read returns: the file's info and the window read.
#[derive(Clone, Debug, PartialEq)]
pub struct FileContent {
    /// The file.
    pub info: FileInfo,
    /// `text`, `binary` or `image`.
    pub kind: String,
    /// The bytes read, whether they came as text or as base64.
    pub content: Vec<u8>,
    /// Where in the file they start.
    pub offset: i64,
    /// Whether they reach the end of the file.
    pub eof: bool,
}

impl FileContent {
    fn from_value(v: Value) -> Result<FileContent, Error> {
        let content = match (v["content"].as_str(), v["content_base64"].as_str()) {
            (Some(text), None) => text.as_bytes().to_vec(),
            (None, Some(b64)) => match base64::decode(b64) {
                Ok(b) => b,
                Err(e) => return protocol(format!("the answer's \"content_base64\": {}", e)),
            },
            _ => {
                return protocol(
                    "a read's answer holds neither \"content\" nor \"content_base64\", or both"
                        .to_string(),
                )
            }
        };
        let kind = field(&v, "kind", Value::as_str, "a string")?.to_string();
        let offset = optional(&v, "offset", Value::as_i64, "a whole number")?.unwrap_or(0);
        let eof = optional(&v, "eof", Value::as_bool, "true or false")?.unwrap_or(false);
        Ok(FileContent {
            info: FileInfo::from_value(v)?,
            kind,
            content,
            offset,
            eof,
        })
    }
}

/// A durable process's record.
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    /// Its id, for the calls on it.
    pub id: String,
    /// Its name, when it was given one.
    pub name: Option<String>,
    /// `running`, `backoff`, `stopped`, `exited`, `failed`, `stale`...
    pub status: String,
    /// The command's pid on the host while it runs.
    pub pid: Option<i64>,
    /// The whole record as it came (`args`, `runs`, `restarts`, `log`...).
    pub raw: Value,
}

impl Process {
    fn from_value(v: Value) -> Result<Process, Error> {
        Ok(Process {
            id: field(&v, "id", Value::as_str, "a string")?.to_string(),
            name: optional(&v, "name", Value::as_str, "a string")?.map(str::to_string),
            status: field(&v, "status", Value::as_str, "a string")?.to_string(),
            pid: optional(&v, "pid", Value::as_i64, "a whole number")?.filter(|&p| p != 0),
            raw: v,
        })
    }
}

/// A durable process's log (`POST /v1/processes/logs`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessLog {
    /// Its stdout and stderr, bytes as written.
    pub content: Vec<u8>,
    /// Whether only its tail is here.
    pub truncated: bool,
}

fn list_of<T>(v: &Value, key: &str, each: fn(Value) -> Result<T, Error>) -> Result<Vec<T>, Error> {
    match v[key].as_array() {
        Some(a) => a.iter().cloned().map(each).collect(),
        None => protocol(format!(
            "the answer's {:?} is {}, not an array",
            key, v[key]
        )),
    }
}

// ---------------------------------------------------------------------------
// The client

/// A client of one `hutch serve`: the sandbox it runs commands in.
/// Each call is one connection; a `Client` may be shared between threads.
#[derive(Clone, Debug)]
pub struct Client {
    socket_path: PathBuf,
    timeout: Option<Duration>,
}

/// An answer's head, and its body to read.
type Answer = (http::Head, http::Body<BufReader<UnixStream>>);

impl Client {
    /// A client of the server on the unix socket socket_path.
    pub fn new(socket_path: impl Into<PathBuf>) -> Client {
        Client {
            socket_path: socket_path.into(),
            timeout: None,
        }
    }

    /// Bounds each read and write on the socket (`None`, the default:
    /// unbounded). It is not a command's timeout
    /// ([`ExecRequest::timeout_ms`]): a command quiet for longer than
    /// this fails its exec with [`Error::Io`].
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Client {
        self.timeout = timeout;
        self
    }

    /// The server's socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    fn connect(&self) -> Result<UnixStream, Error> {
        let s = UnixStream::connect(&self.socket_path)?;
        if self.timeout.is_some() {
            s.set_read_timeout(self.timeout)?;
            s.set_write_timeout(self.timeout)?;
        }
        Ok(s)
    }

    /// Sends a request on its own connection and reads the answer's head;
    /// an error status is read whole and returned as [`Error::Api`].
    /// stdin, when given, follows the body (the API's Hutch-Stdin:
    /// stream), written by a thread of its own while the answer is read:
    /// a command may write output before it reads its stdin.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        stdin: Option<&[u8]>,
    ) -> Result<(Answer, Option<StdinWriter>), Error> {
        let mut sock = self.connect()?;
        let json = body.map(|b| b.to_string().into_bytes());
        let json_len = json.as_ref().map(Vec::len);
        let mut writer = None;
        match stdin {
            None => {
                let mut req = http::request_head(method, path, &[], json_len);
                req.extend_from_slice(json.as_deref().unwrap_or(&[]));
                sock.write_all(&req)?;
            }
            Some(stdin) => {
                // Content-Length covers the request and the stdin; the
                // head and the request go now, the stdin from a thread.
                let total = json_len.unwrap_or(0) + stdin.len();
                let mut req =
                    http::request_head(method, path, &[("Hutch-Stdin", "stream")], Some(total));
                req.extend_from_slice(json.as_deref().unwrap_or(&[]));
                sock.write_all(&req)?;
                let mut w = sock.try_clone()?;
                let data = stdin.to_vec();
                let thread = thread::spawn(move || w.write_all(&data));
                writer = Some(StdinWriter {
                    sock: sock.try_clone()?,
                    thread: Some(thread),
                });
            }
        }
        let mut r = BufReader::new(sock);
        let head = http::read_head(&mut r).map_err(read_error)?;
        let framing = http::framing(&head).map_err(read_error)?;
        let mut body = http::Body::new(r, framing);
        if head.status >= 300 {
            let mut raw = Vec::new();
            (&mut body)
                .take(1 << 20)
                .read_to_end(&mut raw)
                .map_err(read_error)?;
            return Err(api_error(head.status, &raw));
        }
        Ok(((head, body), writer))
    }

    /// A call whose answer is one JSON object.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Error> {
        let ((_, body), _) = self.send(method, path, body, None)?;
        let mut raw = Vec::new();
        body.take(MAX_ANSWER)
            .read_to_end(&mut raw)
            .map_err(read_error)?;
        match json::parse_bytes(&raw) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(v) => protocol(format!("the answer is no JSON object: {}", v)),
            Err(e) => protocol(format!("the answer: {}", e)),
        }
    }

    /// `GET /v1/health`: the server is up, and its workspace.
    pub fn health(&self) -> Result<Health, Error> {
        let v = self.call("GET", "/v1/health", None)?;
        Ok(Health {
            status: field(&v, "status", Value::as_str, "a string")?.to_string(),
            workspace: field(&v, "workspace", Value::as_str, "a string")?.to_string(),
            prewarmed: optional(&v, "prewarmed", Value::as_i64, "a whole number")?.unwrap_or(0),
            raw: v,
        })
    }

    /// `GET /v1/version`: the protocol's version and hutch's.
    pub fn version(&self) -> Result<Version, Error> {
        let v = self.call("GET", "/v1/version", None)?;
        Ok(Version {
            protocol: field(&v, "protocol", Value::as_i64, "a whole number")?,
            hutch_version: optional(&v, "hutch_version", Value::as_str, "a string")?
                .unwrap_or("")
                .to_string(),
            raw: v,
        })
    }

    /// Runs a command to its end and returns its output and result.
    pub fn exec(&self, req: &ExecRequest) -> Result<ExecOutput, Error> {
        self.exec_streaming(req, |_, _| {})
    }

    /// Runs a command as [`exec`](Client::exec) does, and calls
    /// on_output with each chunk of its stdout and stderr as it arrives
    /// (the chunks are also in the [`ExecOutput`] returned).
    pub fn exec_streaming<F>(
        &self,
        req: &ExecRequest,
        mut on_output: F,
    ) -> Result<ExecOutput, Error>
    where
        F: FnMut(OutputStream, &[u8]),
    {
        let body = req.body()?;
        let ((_, answer), stdin_writer) =
            self.send("POST", "/v1/exec", Some(&body), req.stdin.as_deref())?;
        let out = read_events(BufReader::new(answer), &mut on_output);
        // The command has ended (or the call failed): what is left of its
        // stdin goes nowhere.
        drop(stdin_writer);
        out
    }

    /// `POST /v1/files/read`: the file, as a command of the sandbox would
    /// see it.
    pub fn read(&self, path: &str) -> Result<FileContent, Error> {
        self.read_with(&ReadRequest::new(path))
    }

    /// `POST /v1/files/read` with its options (a window, a mode).
    pub fn read_with(&self, req: &ReadRequest) -> Result<FileContent, Error> {
        FileContent::from_value(self.call("POST", "/v1/files/read", Some(&req.body()))?)
    }

    /// `POST /v1/files/write`: writes content to path (replacing the
    /// file) as a command of the sandbox could; returns the file's info.
    pub fn write(&self, path: &str, content: &[u8]) -> Result<FileInfo, Error> {
        self.write_with(&WriteRequest::new(path, content))
    }

    /// `POST /v1/files/write` with its options (append, perm).
    pub fn write_with(&self, req: &WriteRequest) -> Result<FileInfo, Error> {
        FileInfo::from_value(self.call("POST", "/v1/files/write", Some(&req.body()))?)
    }

    /// `POST /v1/files/stat`: the file's info (a symlink's target's).
    pub fn stat(&self, path: &str) -> Result<FileInfo, Error> {
        FileInfo::from_value(self.call("POST", "/v1/files/stat", Some(&path_body("path", path)))?)
    }

    /// `POST /v1/explain`: which rule of the sandbox's policy decides
    /// `path` (absolute, or relative to the workspace) for `access`
    /// (`"read"`, `"write"` or `"execute"`), and how to allow it; nothing is run.
    pub fn explain(&self, path: &str, access: &str) -> Result<Explanation, Error> {
        let body = Value::object(vec![
            ("path", Value::from(path)),
            ("access", Value::from(access)),
        ]);
        Explanation::from_value(self.call("POST", "/v1/explain", Some(&body))?)
    }

    /// `POST /v1/files/list`: the directory's entries (`"."`: the
    /// workspace).
    pub fn list(&self, path: &str) -> Result<Vec<FileInfo>, Error> {
        let v = self.call("POST", "/v1/files/list", Some(&path_body("path", path)))?;
        list_of(&v, "entries", FileInfo::from_value)
    }

    /// `POST /v1/processes/start`: starts a durable process.
    pub fn start_process(&self, req: &ProcessStartRequest) -> Result<Process, Error> {
        Process::from_value(self.call("POST", "/v1/processes/start", Some(&req.body()?))?)
    }

    /// `POST /v1/processes/get`: a durable process's record.
    pub fn get_process(&self, id: &str) -> Result<Process, Error> {
        Process::from_value(self.call("POST", "/v1/processes/get", Some(&path_body("id", id)))?)
    }

    /// `POST /v1/processes/stop`: stops it (SIGTERM, SIGKILL after the
    /// server's `--kill-after`), and returns its record once it is gone.
    pub fn stop_process(&self, id: &str) -> Result<Process, Error> {
        Process::from_value(self.call("POST", "/v1/processes/stop", Some(&path_body("id", id)))?)
    }

    /// `POST /v1/processes/stop-all`: stops every durable process.
    pub fn stop_all_processes(&self) -> Result<Vec<Process>, Error> {
        let v = self.call(
            "POST",
            "/v1/processes/stop-all",
            Some(&Value::object(Vec::<(String, Value)>::new())),
        )?;
        list_of(&v, "processes", Process::from_value)
    }

    /// `GET /v1/processes`: every durable process's record.
    pub fn list_processes(&self) -> Result<Vec<Process>, Error> {
        let v = self.call("GET", "/v1/processes", None)?;
        list_of(&v, "processes", Process::from_value)
    }

    /// `POST /v1/processes/remove`: forgets a stopped process's record
    /// and log (409 `active` while it runs).
    pub fn remove_process(&self, id: &str) -> Result<(), Error> {
        self.call("POST", "/v1/processes/remove", Some(&path_body("id", id)))
            .map(|_| ())
    }

    /// `POST /v1/processes/logs`: a durable process's log, its last
    /// tail_bytes only when given.
    pub fn process_logs(&self, id: &str, tail_bytes: Option<u64>) -> Result<ProcessLog, Error> {
        let mut body = path_body("id", id);
        if let (Some(n), Value::Object(m)) = (tail_bytes, &mut body) {
            m.insert("tail_bytes".to_string(), Value::from(n));
        }
        let v = self.call("POST", "/v1/processes/logs", Some(&body))?;
        let content = match (v["content"].as_str(), v["content_base64"].as_str()) {
            (Some(text), None) => text.as_bytes().to_vec(),
            (None, Some(b64)) => base64::decode(b64)
                .map_err(|e| Error::Protocol(format!("the log's content_base64: {}", e)))?,
            _ => {
                return protocol(
                    "a log's answer holds neither \"content\" nor \"content_base64\", or both"
                        .to_string(),
                )
            }
        };
        Ok(ProcessLog {
            content,
            truncated: optional(&v, "truncated", Value::as_bool, "true or false")?.unwrap_or(false),
        })
    }

    /// `GET /v1/policy`: the policy the server's commands run under, as
    /// its flags and `--policy` file say it (as the last reload read
    /// them), its `--kill-after` and its `--grantable` ceiling.
    pub fn policy(&self) -> Result<ServerPolicy, Error> {
        ServerPolicy::from_value(self.call("GET", "/v1/policy", None)?)
    }

    /// `POST /v1/policy/reload`: has the server read its policy again
    /// (its flags and `--policy` file, as SIGHUP does). Commands started
    /// after it run under the new policy, those running keep theirs; a
    /// policy that does not build is refused ([`Error::Api`]), and the
    /// old one stays in effect.
    pub fn reload(&self) -> Result<Reloaded, Error> {
        Reloaded::from_value(self.call(
            "POST",
            "/v1/policy/reload",
            Some(&Value::object(Vec::<(String, Value)>::new())),
        )?)
    }

    /// `POST /v1/approvals/decide`: judges an agent's tool call as `hutch
    /// grants decide` does, by the server's `--rules` and the remembered
    /// grants of its `--grants-db`. A `prompt` is the caller's to put to
    /// the user. Read-only: no call adds, revokes or lists grants
    /// (consent is the user's to keep, not the agent's it judges).
    pub fn decide(&self, req: &DecideRequest) -> Result<Verdict, Error> {
        Verdict::from_value(self.call("POST", "/v1/approvals/decide", Some(&req.body()))?)
    }

    /// `GET /v1/approvals/rules`: the tools' rules in effect, sorted by
    /// tool, as `hutch grants rules --json` prints them; a tool not
    /// listed is prompted at high danger.
    pub fn approval_rules(&self) -> Result<Vec<ApprovalRule>, Error> {
        let v = self.call("GET", "/v1/approvals/rules", None)?;
        list_of(&v, "rules", ApprovalRule::from_value)
    }
}

fn path_body(key: &str, value: &str) -> Value {
    Value::object(vec![(key, Value::from(value))])
}

/// The [`Error::Api`] of an error status's body: the API's
/// `{"error":{"code","message","field"}}`, or the body as text.
fn api_error(status: u16, raw: &[u8]) -> Error {
    if let Ok(v) = json::parse_bytes(raw) {
        let e = &v["error"];
        if let (Some(code), Some(message)) = (e["code"].as_str(), e["message"].as_str()) {
            return Error::Api {
                status,
                code: code.to_string(),
                message: message.to_string(),
                field: e["field"]
                    .as_str()
                    .filter(|f| !f.is_empty())
                    .map(str::to_string),
            };
        }
    }
    Error::Api {
        status,
        code: "http".to_string(),
        message: String::from_utf8_lossy(raw).trim().to_string(),
        field: None,
    }
}

/// The thread writing an exec's stdin, and the socket to shut to end it.
struct StdinWriter {
    sock: UnixStream,
    thread: Option<thread::JoinHandle<io::Result<()>>>,
}

impl StdinWriter {
    /// Ends the writing, whatever is left of it (the command has ended,
    /// or the call failed), and waits for the thread.
    fn finish(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.sock.shutdown(Shutdown::Both);
            // Its error (EPIPE: the server stopped reading) says nothing
            // the answer has not.
            let _ = t.join();
        }
    }
}

impl Drop for StdinWriter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Reads an exec's ndjson events to its result.
fn read_events<R: BufRead, F: FnMut(OutputStream, &[u8])>(
    mut r: R,
    on_output: &mut F,
) -> Result<ExecOutput, Error> {
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut line = Vec::new();
    loop {
        line.clear();
        (&mut r)
            .take(MAX_EVENT)
            .read_until(b'\n', &mut line)
            .map_err(read_error)?;
        if line.is_empty() {
            return protocol("the exec's stream ended before its result".to_string());
        }
        if line.last() != Some(&b'\n') && line.len() as u64 >= MAX_EVENT {
            return protocol(format!("an exec event longer than {} bytes", MAX_EVENT));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let ev = match json::parse_bytes(&line) {
            Ok(ev) => ev,
            Err(e) => return protocol(format!("an exec event: {}", e)),
        };
        let stream = match ev["type"].as_str() {
            Some("stdout") => OutputStream::Stdout,
            Some("stderr") => OutputStream::Stderr,
            Some("result") => {
                let status = field(&ev, "exit_status", Value::as_i64, "a whole number")?;
                let exit_status = match i32::try_from(status) {
                    Ok(s) => s,
                    Err(_) => return protocol(format!("an exit status out of range: {}", status)),
                };
                let error = optional(&ev, "error", Value::as_str, "a string")?
                    .filter(|e| !e.is_empty())
                    .map(str::to_string);
                let result = match ev {
                    Value::Object(mut m) => m.remove("result").unwrap_or(Value::Null),
                    _ => Value::Null,
                };
                return Ok(ExecOutput {
                    exit_status,
                    stdout,
                    stderr,
                    result,
                    error,
                });
            }
            Some(_) => continue, // "started", or a type this client does not know
            None => return protocol(format!("an exec event with no type: {}", ev)),
        };
        let data = optional(&ev, "data", Value::as_str, "a string")?.unwrap_or("");
        let bytes = if ev["base64"].as_bool() == Some(true) {
            base64::decode(data)
                .map_err(|e| Error::Protocol(format!("an exec event's data: {}", e)))?
        } else {
            data.as_bytes().to_vec()
        };
        on_output(stream, &bytes);
        match stream {
            OutputStream::Stdout => stdout.extend_from_slice(&bytes),
            OutputStream::Stderr => stderr.extend_from_slice(&bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::os::unix::net::UnixListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Chunks = Vec<(OutputStream, Vec<u8>)>;

    fn events(s: &str) -> (Result<ExecOutput, Error>, Chunks) {
        let mut seen = Vec::new();
        let out = read_events(Cursor::new(s.as_bytes()), &mut |st, b: &[u8]| {
            seen.push((st, b.to_vec()))
        });
        (out, seen)
    }

    #[test]
    fn exec_events() {
        let (out, seen) = events(concat!(
            "{\"type\":\"started\"}\n",
            "{\"type\":\"stdout\",\"data\":\"h\u{e9}\\n\"}\n",
            "{\"type\":\"stderr\",\"data\":\"/wBh\",\"base64\":true}\n",
            "\n",
            "{\"type\":\"progress\",\"whatever\":[1]}\n",
            "{\"type\":\"stdout\",\"data\":\"\\u0000z\"}\n",
            "{\"type\":\"result\",\"result\":{\"exit_code\":3,\"killed\":false},\"exit_status\":3}\n",
            "{\"type\":\"stdout\",\"data\":\"after\"}\n",
        ));
        let out = out.unwrap();
        assert_eq!(out.exit_status, 3);
        assert_eq!(out.stdout, "hé\n\0z".as_bytes());
        assert_eq!(out.stderr, b"\xff\x00a");
        assert_eq!(out.result["exit_code"].as_i64(), Some(3));
        assert!(!out.killed());
        assert_eq!(out.error, None);
        assert_eq!(
            seen,
            vec![
                (OutputStream::Stdout, "hé\n".as_bytes().to_vec()),
                (OutputStream::Stderr, b"\xff\x00a".to_vec()),
                (OutputStream::Stdout, b"\0z".to_vec())
            ]
        );
        let (out, _) = events(
            "{\"type\":\"result\",\"exit_status\":127,\"error\":\"exec: no-such: not found\"}",
        );
        let out = out.unwrap();
        assert_eq!(
            (out.exit_status, out.error.as_deref(), out.result.is_null()),
            (127, Some("exec: no-such: not found"), true)
        );
    }

    #[test]
    fn exec_events_broken() {
        for (s, want) in [
            ("", "ended before its result"),
            (
                "{\"type\":\"started\"}\n{\"type\":\"stdout\",\"data\":\"x\"}\n",
                "ended before its result",
            ),
            (
                "{\"type\":\"stdout\",\"data\":\"x\"} trailing\n",
                "invalid JSON",
            ),
            ("not json\n", "invalid JSON"),
            ("{\"data\":\"x\"}\n", "no type"),
            (
                "{\"type\":\"stdout\",\"data\":\"%%%\",\"base64\":true}\n",
                "base64",
            ),
            ("{\"type\":\"stdout\",\"data\":5}\n", "\"data\""),
            (
                "{\"type\":\"result\",\"exit_status\":\"3\"}\n",
                "exit_status",
            ),
            ("{\"type\":\"result\"}\n", "exit_status"),
            (
                "{\"type\":\"result\",\"exit_status\":4294967296}\n",
                "out of range",
            ),
        ] {
            match events(s).0 {
                Err(Error::Protocol(m)) => assert!(m.contains(want), "{:?}: {}", s, m),
                other => panic!("{:?}: {:?}", s, other),
            }
        }
    }

    #[test]
    fn api_errors() {
        let e = api_error(
            403,
            br#"{"error":{"code":"denied","message":"/etc/x: permission denied","field":"path"}}"#,
        );
        match &e {
            Error::Api {
                status: 403,
                code,
                message,
                field: Some(field),
            } => {
                assert_eq!(
                    (code.as_str(), message.as_str(), field.as_str()),
                    ("denied", "/etc/x: permission denied", "path")
                )
            }
            other => panic!("{:?}", other),
        }
        assert_eq!(
            e.to_string(),
            "hutch: 403 denied: path: /etc/x: permission denied"
        );
        assert_eq!((e.status(), e.code()), (Some(403), Some("denied")));
        let e = api_error(502, b"Bad Gateway\n");
        assert_eq!(e.to_string(), "hutch: 502 http: Bad Gateway");
        assert!(matches!(
            api_error(404, br#"{"error":{"code":"not_found","message":"m"}}"#),
            Error::Api { field: None, .. }
        ));
    }

    #[test]
    fn refuses_before_sending() {
        // No server at this path: a request that got as far as connecting
        // would be an Io error.
        let c = Client::new("/nonexistent/hutch-rust-client.sock");
        for (req, field) in [
            (ExecRequest::argv(Vec::<String>::new()), "argv"),
            (ExecRequest::argv([""]), "argv"),
            (ExecRequest::default(), "argv"),
            (ExecRequest::command(""), "command"),
            (
                ExecRequest {
                    argv: Some(vec!["ls".into()]),
                    command: Some("ls".into()),
                    ..ExecRequest::default()
                },
                "command",
            ),
        ] {
            match c.exec(&req) {
                Err(Error::InvalidRequest { field: f, .. }) => assert_eq!(f, field, "{:?}", req),
                other => panic!("{:?}: {:?}", req, other),
            }
        }
        assert!(matches!(
            c.start_process(&ProcessStartRequest::argv(Vec::<String>::new())),
            Err(Error::InvalidRequest { .. })
        ));
        assert!(matches!(
            c.exec(&ExecRequest::argv(["true"])),
            Err(Error::Io(_))
        ));
    }

    #[test]
    fn request_bodies() {
        let req = ExecRequest::argv(["sh", "-c", "x"])
            .cwd("sub")
            .env("B", "2")
            .env("A", "é")
            .timeout_ms(1500)
            .allowed_domain("example.com")
            .package_manager("python")
            .grant("@network")
            .publish("0:8000")
            .reach("0123456789ab:5000")
            .explain()
            .stdin(&b"\xff"[..]);
        assert_eq!(
            req.body().unwrap().to_string(),
            r#"{"allowed_domains":["example.com"],"argv":["sh","-c","x"],"cwd":"sub","env":{"A":"é","B":"2"},"explain":true,"grant":["@network"],"package_managers":["python"],"publish":["0:8000"],"reach":["0123456789ab:5000"],"timeout_ms":1500}"#
        );
        assert_eq!(
            ExecRequest::command("echo hi").body().unwrap().to_string(),
            r#"{"command":"echo hi"}"#
        );
        assert_eq!(
            ProcessStartRequest::command("sleep 1")
                .name("n")
                .restart("never")
                .body()
                .unwrap()
                .to_string(),
            r#"{"command":"sleep 1","name":"n","restart":"never"}"#
        );
        let w = WriteRequest {
            append: true,
            perm: Some("600".into()),
            ..WriteRequest::new("f", &b"\x00\xff"[..])
        };
        assert_eq!(
            w.body().to_string(),
            r#"{"append":true,"content_base64":"AP8=","path":"f","perm":"600"}"#
        );
        let r = ReadRequest {
            offset: Some(2),
            limit: Some(3),
            mode: Some("binary".into()),
            no_follow: true,
            ..ReadRequest::new("f")
        };
        assert_eq!(
            r.body().to_string(),
            r#"{"limit":3,"mode":"binary","no_follow":true,"offset":2,"path":"f"}"#
        );
    }

    #[test]
    fn answers() {
        let dir = json::parse(r#"{"path":"/w/d","host_path":"/w/d","type":"dir","mode":16877,"size":4096,"mod_time":"2025-01-01T00:00:00Z","writable":true}"#).unwrap();
        let fi = FileInfo::from_value(dir).unwrap();
        assert!(fi.is_dir() && !fi.is_file() && fi.writable && !fi.denied);
        assert_eq!(
            (fi.mode, fi.permissions(), fi.mode & 0o170000),
            (0o40755, 0o755, 0o040000)
        );
        let missing =
            json::parse(r#"{"path":"/w/d","host_path":"/w/d","mode":16877,"size":1}"#).unwrap();
        assert!(
            matches!(FileInfo::from_value(missing), Err(Error::Protocol(m)) if m.contains("\"type\""))
        );
        let read = json::parse(r#"{"path":"/w/f","host_path":"/h/f","type":"file","mode":33188,"size":3,"kind":"binary","offset":0,"eof":true,"content_base64":"AP8A","length":3}"#).unwrap();
        let c = FileContent::from_value(read).unwrap();
        assert_eq!(
            (
                c.content.as_slice(),
                c.kind.as_str(),
                c.eof,
                c.info.host_path.as_str()
            ),
            (&b"\x00\xff\x00"[..], "binary", true, "/h/f")
        );
        let p = Process::from_value(
            json::parse(r#"{"id":"p1","status":"running","pid":42,"args":["sleep","9"]}"#).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (p.id.as_str(), p.status.as_str(), p.pid, p.name),
            ("p1", "running", Some(42), None)
        );
    }

    /// A one-connection server of canned bytes: what it was sent, and the
    /// client's answer.
    fn canned<T: Send + 'static>(
        answer: Vec<u8>,
        call: impl FnOnce(Client) -> T + Send + 'static,
    ) -> (Vec<u8>, T) {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hutch-rust-unit-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let sock = dir.join("s.sock");
        let l = UnixListener::bind(&sock).unwrap();
        let client = Client::new(&sock).with_timeout(Some(Duration::from_secs(30)));
        let t = thread::spawn(move || call(client));
        let (mut conn, _) = l.accept().unwrap();
        let mut got = Vec::new();
        let mut r = BufReader::new(conn.try_clone().unwrap());
        // The head, then Content-Length bytes.
        let mut len = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            got.extend_from_slice(line.as_bytes());
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        got.extend_from_slice(&body);
        conn.write_all(&answer).unwrap();
        // Both handles: the client sees the connection end.
        drop(r);
        drop(conn);
        let out = t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        (got, out)
    }

    fn answer(status: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            status,
            body.len(),
            body
        )
        .into_bytes()
    }

    fn chunked(chunks: &[&str]) -> Vec<u8> {
        let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for c in chunks {
            out.extend_from_slice(format!("{:x}\r\n{}\r\n", c.len(), c).as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    #[test]
    fn over_a_socket() {
        let (sent, out) = canned(
            chunked(&[
                "{\"type\":\"started\"}\n",
                "{\"type\":\"stdout\",\"data\":\"/wBh\",\"base64\":true}\n{\"type\":\"stdout\",",
                "\"data\":\"\\u00e9\"}\n",
                "{\"type\":\"result\",\"result\":{\"exit_code\":0},\"exit_status\":0}\n",
            ]),
            |c| c.exec(&ExecRequest::argv(["cat"]).stdin(&b"\x00in\xff"[..])),
        );
        let out = out.unwrap();
        assert_eq!(
            (out.exit_status, out.stdout.as_slice()),
            (0, &b"\xff\x00a\xc3\xa9"[..])
        );
        let sent = String::from_utf8_lossy(&sent);
        assert!(
            sent.starts_with("POST /v1/exec HTTP/1.1\r\nHost: localhost\r\n"),
            "{}",
            sent
        );
        assert!(
            sent.contains("\r\nHutch-Stdin: stream\r\n")
                && sent.contains("\r\nContent-Type: application/json\r\n"),
            "{}",
            sent
        );
        assert!(sent.contains("\r\nContent-Length: 20\r\n"), "{}", sent);
        assert!(
            sent.ends_with("\r\n\r\n{\"argv\":[\"cat\"]}\u{0}in\u{fffd}"),
            "{:?}",
            sent
        );

        let (sent, out) = canned(
            answer(
                "403 Forbidden",
                "{\"error\":{\"code\":\"denied\",\"message\":\"no\",\"field\":\"path\"}}\n",
            ),
            |c| c.write("/etc/x", b"x"),
        );
        assert!(
            matches!(out, Err(Error::Api { status: 403, ref code, .. }) if code == "denied"),
            "{:?}",
            out
        );
        assert!(
            String::from_utf8_lossy(&sent)
                .ends_with("\r\n\r\n{\"content_base64\":\"eA==\",\"path\":\"/etc/x\"}"),
            "{:?}",
            sent
        );

        let (sent, out) = canned(
            answer(
                "200 OK",
                "{\"status\":\"ok\",\"workspace\":\"/w\",\"prewarmed\":2}\n",
            ),
            |c| c.health(),
        );
        assert_eq!(out.unwrap().workspace, "/w");
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );

        let (_, out) = canned(answer("200 OK", "[1,2]"), |c| c.version());
        assert!(matches!(out, Err(Error::Protocol(_))), "{:?}", out);
        let (_, out) = canned(answer("200 OK", "{\"protocol\":1} {}"), |c| c.version());
        assert!(
            matches!(out, Err(Error::Protocol(ref m)) if m.contains("more after")),
            "{:?}",
            out
        );
        let (_, out) = canned(
            b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"protocol\":1}".to_vec(),
            |c| c.version(),
        );
        assert!(
            matches!(out, Err(Error::Protocol(ref m)) if m.contains("connection ended")),
            "{:?}",
            out
        );
        // The stream ends (cleanly) before its result.
        let (_, out) = canned(chunked(&["{\"type\":\"started\"}\n"]), |c| {
            c.exec(&ExecRequest::command("true"))
        });
        assert!(
            matches!(out, Err(Error::Protocol(ref m)) if m.contains("before its result")),
            "{:?}",
            out
        );
    }

    #[test]
    fn policy_calls() {
        let (sent, out) = canned(
            answer(
                "200 OK",
                r#"{"policy":{"Workspace":"/w","Writable":["/x"],"Env":null},"kill_after_ms":2000,"grantable":["@network","write:/y"]}"#,
            ),
            |c| c.policy(),
        );
        let p = out.unwrap();
        assert_eq!(
            (
                p.policy["Workspace"].as_str(),
                p.policy["Writable"][0].as_str(),
                p.kill_after_ms,
                p.grantable.as_slice()
            ),
            (
                Some("/w"),
                Some("/x"),
                2000,
                &["@network".to_string(), "write:/y".to_string()][..]
            )
        );
        assert!(p.policy["Env"].is_null() && p.raw["policy"] == p.policy);
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            "GET /v1/policy HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        );

        let (sent, out) = canned(
            answer("200 OK", r#"{"status":"reloaded","workspace":"/w"}"#),
            |c| c.reload(),
        );
        let r = out.unwrap();
        assert_eq!(
            (r.status.as_str(), r.workspace.as_str()),
            ("reloaded", "/w")
        );
        let sent = String::from_utf8(sent).unwrap();
        assert!(
            sent.starts_with("POST /v1/policy/reload HTTP/1.1\r\n")
                && sent.contains("\r\nContent-Length: 2\r\n")
                && sent.ends_with("\r\n\r\n{}"),
            "{:?}",
            sent
        );

        // A handler built without the policy routes answers them as no
        // route: the API's 404 not_found.
        for reload in [false, true] {
            let (_, out) = canned(
                answer(
                    "404 Not Found",
                    r#"{"error":{"code":"not_found","message":"no route /v1/policy; routes: /v1/exec, /v1/health"}}"#,
                ),
                move |c| {
                    if reload {
                        c.reload().map(|_| ())
                    } else {
                        c.policy().map(|_| ())
                    }
                },
            );
            assert!(
                matches!(out, Err(Error::Api { status: 404, ref code, field: None, .. }) if code == "not_found"),
                "{:?}",
                out
            );
        }

        // An answer short of a field, or with one of another type.
        for body in [
            r#"{"policy":{},"kill_after_ms":2000}"#,
            r#"{"policy":{},"kill_after_ms":2000,"grantable":["@network",1]}"#,
            r#"{"policy":[],"kill_after_ms":2000,"grantable":[]}"#,
            r#"{"policy":{},"kill_after_ms":"2s","grantable":[]}"#,
        ] {
            let (_, out) = canned(answer("200 OK", body), |c| c.policy());
            assert!(
                matches!(out, Err(Error::Protocol(_))),
                "{}: {:?}",
                body,
                out
            );
        }
        let (_, out) = canned(answer("200 OK", r#"{"status":"reloaded"}"#), |c| c.reload());
        assert!(
            matches!(out, Err(Error::Protocol(ref m)) if m.contains("\"workspace\"")),
            "{:?}",
            out
        );
    }
}
