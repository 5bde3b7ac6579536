"""A client of hutch's local API (hutch serve), standard library only.

    sb = Sandbox("/run/user/1000/hutch/hutch.sock")
    r = sb.exec(command="make test", cwd="src", timeout_ms=60000, env={"CI": "1"})
    r.exit_code, r.stdout, r.stderr, r.result   # result: the runtime.Result, a dict
    sb.read("notes.md")                          # {"content": ..., "path": ..., ...}
    sb.write("/abs/path/in/workspace.txt", "text")
    stat.S_ISDIR(sb.stat("src")["mode"])         # mode: the POSIX st_mode

The protocol is JSON over HTTP/1.1 on a unix socket (docs/local-api.md in
hutch's repository); a refusal comes back as HutchError with the server's
code, message and field. hutch_client.aio.AsyncSandbox has the same
methods as coroutines, for asyncio.

Answers are the server's JSON objects as dicts, typed below (FileInfo,
ReadResult, ProcessRecord...) as TypedDicts: a key a later server adds is
kept as it comes.
"""

import base64
import json
import select
import socket
import threading
import weakref
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    Union,
    cast,
)

if TYPE_CHECKING:
    from .aio import AsyncSandbox

__all__ = [
    "Sandbox",
    "AsyncSandbox",
    "ExecResult",
    "HutchError",
    "PROTOCOL_VERSION",
    "content_bytes",
    "Health",
    "Version",
    "Result",
    "ResultEvent",
    "ExecEvent",
    "FileType",
    "FileInfo",
    "ReadResult",
    "ProcessRecord",
    "ProcessRun",
    "Published",
    "ProcessLogs",
    "Removed",
    "Reloaded",
    "ServerPolicy",
    "Explanation",
    "Verdict",
    "ApprovalRule",
]

__version__ = "0.1.0"

PROTOCOL_VERSION = 1


# ---------------------------------------------------------------------------
# What comes back: the server's JSON objects, as dicts.

class Health(TypedDict):
    """GET /v1/health."""

    status: str
    #: The workspace's absolute path.
    workspace: str
    prewarmed: int


class Version(TypedDict):
    """GET /v1/version."""

    protocol: int
    hutch_version: str


class Reloaded(TypedDict):
    """POST /v1/policy/reload."""

    status: str
    workspace: str


class _ExplanationRequired(TypedDict):
    #: The path as asked, and as a command's kernel would reach it (every
    #: symlink followed in the sandbox's view).
    path: str
    view: str
    #: "read", "write" or "execute".
    access: str
    allowed: bool
    #: The kind of rule (runtime.Rule): "default-deny", "deny-name",
    #: "git-guard", "outside-writable", "not-in-view", "private-tmp"...
    rule: str
    #: The rule in a sentence, naming the path it is on.
    reason: str


class Explanation(_ExplanationRequired, total=False):
    """POST /v1/explain: which rule decides a path for an access."""

    #: The host's file the view shows there.
    host_path: str
    #: How the caller could allow a refused access: "flag" (hutch run's),
    #: "key" (a policy file's), "grant" (a permission tag).
    allow: Dict[str, str]


class ServerPolicy(TypedDict):
    """GET /v1/policy: the policy the server's commands run under."""

    #: hutch's runtime.Policy as the server's flags and --policy file say it
    #: (as the last reload read them), its keys as Go names them
    #: ("Workspace", "Writable", "Deny", "Env", "Network", "Memory"...),
    #: before what the server adds: its grant ceiling, its hidden
    #: directories, its pool.
    policy: Dict[str, Any]
    #: The grace between a stop's SIGTERM and its SIGKILL (--kill-after).
    kill_after_ms: int
    #: The ceiling of a call's grant (--grantable), as permission tags
    #: ("@network", "write:/path"...).
    grantable: List[str]


class _VerdictRequired(TypedDict):
    decision: str
    danger: str
    reason: str


class Verdict(_VerdictRequired, total=False):
    """POST /v1/approvals/decide: the server's judgment of a tool call, as
    hutch grants decide prints it. "decision" is "allow" (make the call),
    "deny" (refuse it) or "prompt" (ask the user; a grant they remember is
    theirs to add, with hutch grants add); "danger" is "low", "medium" or
    "high"."""

    #: The remembered grant that decided, if one did.
    grant: int
    #: All those that did, when a shell call's commands were allowed by
    #: several ("grant" is the first).
    grants: List[int]


class ApprovalRule(TypedDict):
    """A tool's rule, of GET /v1/approvals/rules (hutch grants rules --json)."""

    tool: str
    decision: str
    danger: str
    #: The tool's argument is a command line, judged command by command.
    shell: bool


class _ResultRequired(TypedDict):
    exit_code: int
    wall_ns: int
    startup_ns: int
    killed: bool
    layers: Optional[List[str]]
    level: str
    network: str


class Result(_ResultRequired, total=False):
    """The command's runtime.Result, as `hutch run --result-json` writes
    its fields. exit_code is the command's status, -1 if a signal ended it
    (signal)."""

    signal: int
    #: "timeout", "context canceled", "output limit", "sandbox died", "stopped".
    kill_reason: str
    truncated: bool
    prewarmed: bool
    skipped: List[Any]
    phases: List[Any]
    seccomp_profile: str
    unenforced: List[str]
    backend: str
    unsandboxed: bool
    network_events: List[Dict[str, Any]]
    #: The sandbox's published ports ({"host_ip", "host_port", "port", "protocol"}).
    published: List["Published"]
    #: The connections forwarded in through them (peer, host_port, port, bytes_in, bytes_out).
    ingress: List[Dict[str, Any]]
    unix_socket_wall: str
    repositories: List[Dict[str, str]]
    trees_walked: str
    landlock_abi: int
    cgroup: str
    usage: Dict[str, Any]
    leaks: List[Dict[str, Any]]
    leaks_dropped: int
    leak_action: str
    #: What the command was refused while it ran, by kind ({"source", "op",
    #: "object", "errno", "count", "rule", "reason", "allow"}).
    denials: List[Dict[str, Any]]
    denials_dropped: int
    reason: str
    error: str


class _ResultEventRequired(TypedDict):
    type: Literal["result"]
    result: Result
    #: What `hutch run` would exit with (ExecResult.exit_code).
    exit_status: int


class ResultEvent(_ResultEventRequired, total=False):
    """An exec's last event, as the server sent it."""

    #: Why the command did not run, or what went wrong copying its output.
    error: str


#: An exec's events as exec_stream yields them: ("stdout", bytes),
#: ("stderr", bytes), and last ("result", ResultEvent).
class Published(TypedDict):
    """A published port: host_ip:host_port on the host reaches the
    sandbox's 127.0.0.1:port."""

    host_ip: str
    host_port: int
    port: int
    protocol: str


ExecEvent = Union[Tuple[Literal["stdout", "stderr"], bytes], Tuple[Literal["result"], ResultEvent],
                  Tuple[Literal["published"], List[Published]]]

#: A file's type, as FileInfo's "type" names it.
FileType = Literal["file", "dir", "symlink", "fifo", "socket", "char_device", "block_device", "other"]


class _FileInfoRequired(TypedDict):
    #: The path as a command of the sandbox names it, symlinks resolved.
    path: str
    #: The same file on the host.
    host_path: str
    size: int
    #: What kind of file it is.
    type: FileType
    #: The POSIX st_mode (type bits, set-id and sticky bits, permissions):
    #: stat.S_ISDIR(info["mode"]), stat.S_IMODE(info["mode"]).
    mode: int
    #: RFC 3339.
    mod_time: str
    #: A command may write it.
    writable: bool


class FileInfo(_FileInfoRequired, total=False):
    """A file the file door reached (files/stat, files/write, an entry of
    files/list)."""

    #: path as ~/..., when it lies in the sandbox's HOME.
    home_path: str
    #: In a listing: masked to commands (they see it empty).
    denied: bool
    #: In a listing: a command sees a filesystem of its own there (/tmp, /dev, /proc).
    private: bool


class _ReadRequired(FileInfo):
    #: "text", "binary" or "image".
    kind: str
    #: The first byte read.
    offset: int
    #: How many bytes were read.
    length: int
    #: The bytes read reach the end of the file.
    eof: bool


class ReadResult(_ReadRequired, total=False):
    """POST /v1/files/read: the file's info, then the bytes read, as
    "content" when they are text, else "content_base64"
    (content_bytes() gives them either way)."""

    content: str
    content_base64: str
    mime: str
    width: int
    height: int
    #: The secrets found in the content (never the secrets themselves).
    leaks: List[Dict[str, Any]]


class _ProcessRunRequired(TypedDict):
    started: str
    #: -1 when a signal ended it (signal) or it did not start (error).
    exit_code: int


class ProcessRun(_ProcessRunRequired, total=False):
    """One run of a durable process's command."""

    ended: str
    pid: int
    signal: str
    error: str
    #: What the run was refused, by which rule (as an exec result's):
    #: those recorded so far while it runs, its result's once it ended.
    denials: List[Dict[str, Any]]
    denials_dropped: int


class _ProcessRecordRequired(TypedDict):
    id: str
    args: List[str]
    created: str
    #: "running", "starting", "backoff", "stopping", "stopped", "exited", "failed", "stale".
    status: str
    #: "running" or "stopped".
    desired: str
    #: "always", "on-failure" or "never".
    restart: str
    restarts: int
    backoff: Dict[str, Any]
    #: The log file on the host.
    log: str


class ProcessRecord(_ProcessRecordRequired, total=False):
    """A durable process's record (/v1/processes)."""

    name: str
    reason: str
    #: The command's pid on the host while it runs.
    pid: int
    supervisor: Dict[str, Any]
    runs: List[ProcessRun]
    log_full: bool
    log_dropped: int
    #: The host ports that reach the process (publish=[...]), held across its restarts.
    published: List["Published"]


class _ProcessLogsRequired(TypedDict):
    id: str
    length: int
    #: The log held more than these bytes (tail_bytes, or the server's cap).
    truncated: bool


class ProcessLogs(_ProcessLogsRequired, total=False):
    """POST /v1/processes/logs: "content" when the log is text, else
    "content_base64" (content_bytes() gives them either way)."""

    content: str
    content_base64: str


class Removed(TypedDict):
    """POST /v1/processes/remove."""

    removed: str


def content_bytes(answer: Union[ReadResult, ProcessLogs]) -> bytes:
    """The bytes of a read's or a log's answer, whichever way they came
    (content or content_base64)."""
    if "content_base64" in answer:
        return base64.b64decode(answer["content_base64"])
    return answer.get("content", "").encode("utf-8")


class HutchError(Exception):
    """An error response: status is the HTTP status, code the API's word
    for it (bad_request, denied, private, not_found, not_permitted, active,
    ...), field the request's field at fault, if one is."""

    status: int
    code: str
    message: str
    field: Optional[str]

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None) -> None:
        super().__init__(f"{code}: {field + ': ' if field else ''}{message}")
        self.status, self.code, self.message, self.field = status, code, message, field


class ExecResult:
    """A finished command: exit_code is hutch run's exit status (the
    command's, 128+N for signal N, 126/127 not executable/not found, 125
    hutch failed), result the full runtime.Result as a dict."""

    exit_code: int
    #: The output decoded as UTF-8, invalid bytes replaced.
    stdout: str
    stderr: str
    result: Result
    #: Why the command did not run, or what went wrong copying its output.
    error: Optional[str]
    #: The output exactly as the command wrote it.
    stdout_bytes: bytes
    stderr_bytes: bytes

    def __init__(self, exit_code: int, stdout: str, stderr: str, result: Result, error: Optional[str] = None,
                 stdout_bytes: Optional[bytes] = None, stderr_bytes: Optional[bytes] = None) -> None:
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr
        self.result, self.error = result, error
        self.stdout_bytes = stdout.encode() if stdout_bytes is None else stdout_bytes
        self.stderr_bytes = stderr.encode() if stderr_bytes is None else stderr_bytes

    @property
    def killed(self) -> bool:
        return bool(self.result.get("killed"))

    @property
    def kill_reason(self) -> str:
        """result's kill_reason ("timeout"...), or ""."""
        return self.result.get("kill_reason", "")

    def __repr__(self) -> str:
        return f"ExecResult(exit_code={self.exit_code!r}, killed={self.killed!r})"


#: Receives each chunk of output as it arrives: ("stdout" or "stderr", bytes).
OnOutput = Callable[[str, bytes], Any]

StrList = Sequence[str]
Stdin = Union[str, bytes, bytearray, memoryview]


# ---------------------------------------------------------------------------
# The wire, shared with hutch_client.aio.

def _command(argv: Optional[StrList], command: Optional[str], cwd: Optional[str], env: Optional[Mapping[str, str]],
             allowed_domains: Optional[StrList], package_managers: Optional[StrList],
             grant: Optional[StrList], publish: Optional[StrList] = None) -> Dict[str, Any]:
    """The request's fields for what runs, those given only."""
    body: Dict[str, Any] = {}
    for k, v in (("argv", argv), ("command", command), ("cwd", cwd), ("env", env),
                 ("allowed_domains", allowed_domains), ("package_managers", package_managers),
                 ("grant", grant), ("publish", publish)):
        if v is None:
            continue
        if k in ("argv", "allowed_domains", "package_managers", "grant", "publish"):
            if isinstance(v, (str, bytes)):
                # list("ls") would run ["l", "s"].
                raise TypeError(f"{k} must be a list of strings, not {type(v).__name__} {v!r}"
                                + (": give [" + repr(v) + "], or command=" + repr(v) if k == "argv" else ""))
            v = list(v)
        elif k == "env" and isinstance(v, Mapping):
            v = dict(v)
        body[k] = v
    return body


def _exec_body(argv: Optional[StrList], command: Optional[str], cwd: Optional[str], env: Optional[Mapping[str, str]],
               stdin: Optional[Stdin], timeout_ms: Optional[int], allowed_domains: Optional[StrList],
               package_managers: Optional[StrList], grant: Optional[StrList],
               publish: Optional[StrList] = None,
               reach: Optional[StrList] = None,
               explain: bool = False) -> Tuple[Dict[str, Any], Optional[bytes]]:
    """POST /v1/exec's object, and the stdin to stream after it (bytes)."""
    body = _command(argv, command, cwd, env, allowed_domains, package_managers, grant, publish)
    if reach is not None:
        if isinstance(reach, (str, bytes)):
            raise TypeError(f"reach must be a list of strings, not {type(reach).__name__} {reach!r}")
        body["reach"] = list(reach)
    stdin_bytes = None
    if isinstance(stdin, (bytes, bytearray, memoryview)):
        stdin_bytes, stdin = bytes(stdin), None
    for k, v in (("stdin", stdin), ("timeout_ms", timeout_ms)):
        if v is not None:
            body[k] = v
    if explain:
        body["explain"] = True
    return body, stdin_bytes


def _read_body(path: str, offset: Optional[int], limit: Optional[int], mode: Optional[str],
               no_follow: bool) -> Dict[str, Any]:
    body: Dict[str, Any] = {"path": path}
    for k, v in (("offset", offset), ("limit", limit), ("mode", mode)):
        if v is not None:
            body[k] = v
    if no_follow:
        body["no_follow"] = True
    return body


def _write_body(path: str, content: Union[str, bytes, bytearray, memoryview], append: bool,
                perm: Union[int, str, None], no_follow: bool) -> Dict[str, Any]:
    body: Dict[str, Any] = {"path": path}
    if isinstance(content, (bytes, bytearray, memoryview)):
        body["content_base64"] = base64.b64encode(content).decode()
    else:
        body["content"] = content
    if append:
        body["append"] = True
    if perm is not None:
        # The wire has the octal digits as a string ("644"); 0o644 is the
        # same mode.
        if isinstance(perm, bool) or not isinstance(perm, (int, str)):
            raise TypeError(f"perm must be an int such as 0o644 or a string such as '644', not {perm!r}")
        body["perm"] = format(perm, "o") if isinstance(perm, int) else perm
    if no_follow:
        body["no_follow"] = True
    return body


def _start_body(argv: Optional[StrList], command: Optional[str], cwd: Optional[str], env: Optional[Mapping[str, str]],
                name: Optional[str], restart: Optional[str], allowed_domains: Optional[StrList],
                package_managers: Optional[StrList], grant: Optional[StrList],
                publish: Optional[StrList] = None, explain: bool = False) -> Dict[str, Any]:
    body = _command(argv, command, cwd, env, allowed_domains, package_managers, grant, publish)
    for k, v in (("name", name), ("restart", restart)):
        if v is not None:
            body[k] = v
    if explain:
        body["explain"] = True
    return body


def _logs_body(id: str, tail_bytes: Optional[int]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"id": id}
    if tail_bytes is not None:
        body["tail_bytes"] = tail_bytes
    return body


def _decide_body(tool: str, arg: Optional[str], agent: Optional[str], workspace: Optional[str]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"tool": tool}
    for k, v in (("arg", arg), ("agent", agent), ("workspace", workspace)):
        if v is not None:
            body[k] = v
    return body


def _error(status: int, raw: bytes) -> HutchError:
    """The HutchError of an error response's body."""
    try:
        e = json.loads(raw)["error"]
        return HutchError(status, e.get("code", ""), e.get("message", ""), e.get("field"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return HutchError(status, "http", raw.decode("utf-8", "replace"))


def _event(line: bytes) -> Optional[ExecEvent]:
    """An exec response's line as exec_stream yields it; None for a type
    this client does not use (a "started" without published ports, or one
    a later server adds)."""
    if not line.strip():
        return None
    ev = json.loads(line)
    t = ev.get("type")
    if t == "stdout" or t == "stderr":
        data = ev.get("data", "")
        return (t, base64.b64decode(data) if ev.get("base64") else data.encode())
    if t == "result":
        return ("result", ev)
    if t == "started" and ev.get("published"):
        return ("published", ev["published"])
    return None


def _exec_result(ev: ResultEvent, out: bytearray, err: bytearray) -> ExecResult:
    return ExecResult(ev["exit_status"], out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                      ev["result"], ev.get("error"), bytes(out), bytes(err))


def _request_bytes(method: str, path: str, body: Optional[Dict[str, Any]], stdin_bytes: Optional[bytes]) -> bytes:
    """A request's head and its JSON body, to be sent in one write (the
    server, woken by a head alone, would wait again for the body). With
    stdin_bytes, the body goes on with the command's stdin, bytes as they
    are (the API's Hutch-Stdin: stream), which the caller sends after."""
    head = ["%s %s HTTP/1.1" % (method, path), "Host: hutch"]
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        head.append("Content-Type: application/json")
    if stdin_bytes is not None:
        head.append("Hutch-Stdin: stream")
    if body is not None or method != "GET":
        head.append("Content-Length: %d" % (len(data) + len(stdin_bytes or b"")))
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


def _framing(status: int, headers: Dict[str, str]) -> Tuple[bool, Optional[int]]:
    """How a response's body ends: whether it is chunked, else its
    Content-Length if it has one (else it ends with the connection)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return True, None
    if "content-length" not in headers:
        return False, None
    try:
        return False, int(headers["content-length"])
    except ValueError:
        raise HutchError(status, "http", "bad Content-Length: " + headers["content-length"]) from None


def _whole_lines(buf: bytearray) -> List[bytes]:
    """Takes the whole lines off the front of buf."""
    out = []
    while True:
        i = buf.find(b"\n")
        if i < 0:
            return out
        out.append(bytes(buf[:i + 1]))
        del buf[:i + 1]


def _truncated(status: int) -> HutchError:
    return HutchError(status, "truncated", "the response ended before the result")


# ---------------------------------------------------------------------------
# The client.

class _Ended(Exception):
    """The connection ended (or broke the protocol) before what was being
    read was whole."""


# A response's head (status line and headers) is at most this big, as a
# chunk's size line or a trailer.
_MAX_HEAD = 64 << 10


class _Conn:
    """One connection to the server: its socket, what it received and has
    not yet been read, and the stdin sent beside the response's reading.
    HTTP/1.1 as the API speaks it, written here rather than with
    http.client, which costs a call about 0.2 ms more of Python (its
    request in two writes, its headers parsed as e-mail, its chunks read
    through layers of files): a third of what the API adds to a command."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        self._path, self._timeout = path, timeout
        self.sock: Optional[socket.socket] = None
        self._buf = bytearray()
        self._stdin: Optional[threading.Thread] = None

    def send(self, data: bytes) -> None:
        """Sends data, connecting first if this connection is new."""
        if self.sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self._timeout)
            try:
                s.connect(self._path)
            except OSError:
                s.close()
                raise
            self.sock = s
        self.sock.sendall(data)

    def _fill(self) -> None:
        """Receives more; _Ended at the connection's end. The server resets
        a connection it closes with bytes of ours unread (a command's
        stdin it did not read all of), after what it sent, which the
        kernel gives first: a reset is read as the end, and what was cut
        short is told by the framing."""
        assert self.sock is not None
        try:
            data = self.sock.recv(1 << 16)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            raise _Ended()
        self._buf += data

    def readline(self) -> bytes:
        """The next line, its b"\r\n" (or b"\n") included."""
        start = 0
        while True:
            i = self._buf.find(b"\n", start)
            if i >= 0:
                line = bytes(self._buf[:i + 1])
                del self._buf[:i + 1]
                return line
            if len(self._buf) > _MAX_HEAD:
                raise _Ended()
            start = len(self._buf)
            self._fill()

    def readexactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def read_some(self, n: int) -> bytes:
        """At most n bytes, as soon as there are some; b"" at the end."""
        if not self._buf:
            try:
                self._fill()
            except _Ended:
                return b""
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def response(self) -> "_Response":
        """Reads a response's head (after any interim 1xx ones)."""
        try:
            while True:
                line = self.readline()
                parts = line.decode("latin-1").split(None, 2)
                if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                    raise ValueError(line)
                status = int(parts[1])
                headers: Dict[str, str] = {}
                size = 0
                while True:
                    h = self.readline()
                    size += len(h)
                    if size > _MAX_HEAD:
                        raise ValueError("response head too large")
                    if h == b"\r\n" or h == b"\n":
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                if status >= 200:  # 1xx: another head follows
                    return _Response(self, status, headers, keep=parts[0] != "HTTP/1.0")
        except (_Ended, ValueError) as e:
            raise HutchError(0, "http", "not an HTTP/1.1 response: %r" % (e,)) from None

    def idle(self) -> bool:
        """Whether a kept connection can carry a request: the server has
        not closed it, and it has nothing to read (an idle connection that
        has is out of step)."""
        return self.sock is not None and not self._buf and not select.select([self.sock], [], [], 0)[0]

    def send_stdin(self, data: bytes) -> None:
        """Sends data (the rest of the body) from a thread of its own, while
        the response is read: a command that does not read all of its stdin
        ends, and the server then stops reading; its result is here all the
        same (sent whole first, the write refused would lose it)."""
        if self.sock is None:
            raise RuntimeError("send_stdin before the request")
        sock = self.sock

        def send() -> None:
            try:
                sock.sendall(data)
            except OSError:
                pass  # the server stopped reading: the command has ended

        self._stdin = threading.Thread(target=send, name="hutch_client stdin", daemon=True)
        self._stdin.start()

    def hang_up(self) -> None:
        """Closes the connection at once, whatever still uses the socket
        (a thread sending stdin): the server sees the client gone, and
        stops the command."""
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._stdin is not None:
            self._stdin.join()
            self._stdin = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self._buf.clear()


class _Response:
    """An HTTP/1.1 response being read: its status and headers, then its
    body by Content-Length, chunked, or up to the end of the connection."""

    def __init__(self, conn: _Conn, status: int, headers: Dict[str, str], keep: bool) -> None:
        self._conn, self.status, self.headers = conn, status, headers
        # ended: the body was read to its end by its framing (length or
        # chunks), so the connection can carry another request, unless
        # the server closes it (will_close).
        self.ended = False
        self.will_close = not keep or headers.get("connection", "").lower() == "close"
        self._chunked, self._left = _framing(status, headers)

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they arrive."""
        c = self._conn
        try:
            if self._chunked:
                while True:
                    size = int(c.readline().split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        # Trailers, up to the empty line.
                        while c.readline() not in (b"\r\n", b"\n"):
                            pass
                        self.ended = True
                        return
                    data = c.readexactly(size)
                    c.readexactly(2)
                    yield data
            elif self._left is not None:
                while self._left > 0:
                    data = c.read_some(min(self._left, 1 << 16))
                    if not data:
                        raise _Ended()
                    self._left -= len(data)
                    yield data
                self.ended = True
            else:
                while True:
                    data = c.read_some(1 << 16)
                    if not data:
                        return
                    yield data
        except (_Ended, ValueError):
            raise HutchError(self.status, "truncated", "the response ended early or is not HTTP/1.1") from None

    def read(self) -> bytes:
        return b"".join(self.chunks())

    def lines(self) -> Iterator[bytes]:
        """The body's lines (ndjson), each as soon as it is whole."""
        buf = bytearray()
        for data in self.chunks():
            buf += data
            yield from _whole_lines(buf)
        if buf:
            yield bytes(buf)


#: How many idle connections a Sandbox keeps for its next calls.
_MAX_IDLE = 4


class _Stale(Exception):
    """A kept connection the server had closed (its idle timeout, a
    restart) refused the request as it was sent: none of it was read, and
    it is sent again on a new connection. Once a request is sent, a
    failure is never retried: the server may have run the command."""


def _hang_up_all(idle: List[_Conn], lock: threading.Lock) -> None:
    with lock:
        conns = idle[:]
        idle.clear()
    for conn in conns:
        conn.hang_up()


class Sandbox:
    """The sandbox a hutch serve process on socket_path runs commands in.
    A call whose answer was read to its end leaves its connection open for
    the next (at most four kept; close() ends them, as leaving a with
    block does); a call left early (an exec_stream loop broken off), or one
    sending stdin, closes its own, which stops its command. A Sandbox may
    be shared between threads."""

    socket_path: str
    timeout: Optional[float]

    def __init__(self, socket_path: str, timeout: Optional[float] = None) -> None:
        # timeout bounds each socket operation, not a command (timeout_ms).
        self.socket_path, self.timeout = socket_path, timeout
        self._idle: List[_Conn] = []
        self._idle_lock = threading.Lock()
        # A Sandbox dropped unclosed closes what it kept all the same.
        self._finalizer = weakref.finalize(self, _hang_up_all, self._idle, self._idle_lock)

    def close(self) -> None:
        """Closes the connections kept for later calls."""
        _hang_up_all(self._idle, self._idle_lock)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _kept(self) -> Optional[_Conn]:
        """A kept connection the server has not closed, or None."""
        while True:
            with self._idle_lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if conn.idle():
                return conn
            conn.hang_up()

    def _done(self, conn: _Conn, resp: _Response) -> None:
        """Ends a call whose answer was read to its end: its connection is
        kept for the next call, unless the server is closing it."""
        if resp.ended and not resp.will_close and conn._stdin is None and conn.sock is not None:
            with self._idle_lock:
                if len(self._idle) < _MAX_IDLE:
                    self._idle.append(conn)
                    return
        conn.hang_up()

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                 stdin_bytes: Optional[bytes] = None) -> Tuple[_Conn, _Response]:
        # A call sending stdin has a connection of its own: a thread sends
        # on it while the answer is read.
        conn = self._kept() if stdin_bytes is None else None
        if conn is not None:
            try:
                return self._send(conn, method, path, body, stdin_bytes, kept=True)
            except _Stale:
                pass
        return self._send(_Conn(self.socket_path, self.timeout), method, path, body, stdin_bytes)

    def _send(self, conn: _Conn, method: str, path: str, body: Optional[Dict[str, Any]],
              stdin_bytes: Optional[bytes], kept: bool = False) -> Tuple[_Conn, _Response]:
        try:
            try:
                conn.send(_request_bytes(method, path, body, stdin_bytes))
            except (BrokenPipeError, ConnectionResetError) as e:
                if kept:
                    raise _Stale() from e
                raise
            if stdin_bytes is not None:
                conn.send_stdin(stdin_bytes)
            resp = conn.response()
            answer = resp.read() if resp.status >= 400 else b""
        except BaseException:
            conn.hang_up()
            raise
        if resp.status >= 400:
            self._done(conn, resp)
            raise _error(resp.status, answer)
        return conn, resp

    def _json(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        conn, resp = self._request(method, path, body)
        try:
            answer = json.loads(resp.read())
        except BaseException:
            conn.hang_up()
            raise
        self._done(conn, resp)
        return answer

    def health(self) -> Health:
        return cast(Health, self._json("GET", "/v1/health"))

    def version(self) -> Version:
        return cast(Version, self._json("GET", "/v1/version"))

    def exec_stream(self, argv: Optional[StrList] = None, command: Optional[str] = None, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, stdin: Optional[Stdin] = None,
                    timeout_ms: Optional[int] = None, allowed_domains: Optional[StrList] = None,
                    package_managers: Optional[StrList] = None,
                    grant: Optional[StrList] = None, publish: Optional[StrList] = None,
                    reach: Optional[StrList] = None, explain: bool = False) -> Iterator[ExecEvent]:
        """Yields the exec's events as they come: ("stdout", bytes),
        ("stderr", bytes), then ("result", ResultEvent) last, the server's
        event as a dict (its "exit_status", "result" and "error"). stdin
        is text (str) or bytes, sent as they are. Leaving the loop early
        closes the connection, which stops the command. publish
        (["0:8000"], as hutch run --publish) makes the sandbox's ports
        reachable on the host's loopback while the command runs: the first
        event is then ("published", [Published]), the host ports chosen.
        reach (["ID:8000"], as hutch run --reach) leads the command's
        localhost:8000 to the durable process ID's published port 8000.
        explain appends to the command's stderr, after its own output, a
        few lines naming what it was refused, by which rule, and how to
        allow each ("hutch: refused ..."; the result's "denials" hold
        them either way)."""
        body, stdin_bytes = _exec_body(argv, command, cwd, env, stdin, timeout_ms, allowed_domains,
                                       package_managers, grant, publish, reach, explain)
        conn, resp = self._request("POST", "/v1/exec", body, stdin_bytes)
        done = False
        try:
            lines = resp.lines()
            for line in lines:
                ev = _event(line)
                if ev is not None:
                    if ev[0] == "result":
                        # The body's end follows the result at once: read,
                        # it leaves the connection for the next call.
                        for _ in lines:
                            pass
                        done = True
                        yield ev
                        return
                    yield ev
            raise _truncated(resp.status)
        finally:
            if done:
                self._done(conn, resp)
            else:
                conn.hang_up()

    def exec(self, argv: Optional[StrList] = None, command: Optional[str] = None, cwd: Optional[str] = None,
             env: Optional[Mapping[str, str]] = None, stdin: Optional[Stdin] = None, timeout_ms: Optional[int] = None,
             allowed_domains: Optional[StrList] = None, package_managers: Optional[StrList] = None,
             grant: Optional[StrList] = None, on_output: Optional[OnOutput] = None,
             publish: Optional[StrList] = None, reach: Optional[StrList] = None,
             explain: bool = False) -> ExecResult:
        """Runs a command (argv, or command as sh -c) and returns its
        ExecResult, stdout and stderr decoded as UTF-8 (invalid bytes
        replaced; stdout_bytes and stderr_bytes hold them as written).
        cwd is relative to the workspace; timeout_ms stops the command as
        hutch run --timeout does (SIGTERM, SIGKILL the server's
        --kill-after later). allowed_domains, package_managers and grant
        (permission tags) ask for more than the server's policy, within
        its --grantable ceiling (HutchError not_permitted otherwise).
        on_output(stream, data_bytes), if given, sees each chunk as it
        arrives. explain: as exec_stream."""
        out, err = bytearray(), bytearray()
        events = self.exec_stream(argv, command, cwd, env, stdin, timeout_ms,
                                  allowed_domains, package_managers, grant, publish, reach, explain)
        try:
            for ev in events:
                if ev[0] == "result":
                    return _exec_result(ev[1], out, err)
                if ev[0] == "published":
                    continue  # in the result's "published" too
                t, data = ev
                (out if t == "stdout" else err).extend(data)
                if on_output is not None:
                    on_output(t, data)
            raise _truncated(0)  # exec_stream raises first
        finally:
            events.close()  # its connection kept, or closed, now

    def read(self, path: str, offset: Optional[int] = None, limit: Optional[int] = None, mode: Optional[str] = None,
             no_follow: bool = False) -> ReadResult:
        """The file as a command of the sandbox would see it: a dict with
        "content" (text) or "content_base64", and path, host_path, type,
        mode, size... mode ("text" or "binary") says how to present it
        (the default tells text, binary and images apart); no_follow
        refuses a symlink."""
        return cast(ReadResult, self._json("POST", "/v1/files/read", _read_body(path, offset, limit, mode, no_follow)))

    def write(self, path: str, content: Union[str, bytes, bytearray, memoryview], append: bool = False,
              perm: Union[int, str, None] = None, no_follow: bool = False) -> FileInfo:
        """Writes content (str, or bytes) to the absolute path, as a command
        of the sandbox could; returns the file's info. perm is the mode of
        a file the write creates (0o644 or "644"), subject to the server's
        umask."""
        return cast(FileInfo, self._json("POST", "/v1/files/write",
                                         _write_body(path, content, append, perm, no_follow)))

    def stat(self, path: str) -> FileInfo:
        """The file's info: "type" ("file", "dir", "symlink"...) and
        "mode", the POSIX st_mode (stat.S_ISDIR(info["mode"]))."""
        return cast(FileInfo, self._json("POST", "/v1/files/stat", {"path": path}))

    def explain(self, path: str, access: str = "read") -> Explanation:
        """Which rule of the sandbox's policy decides path (absolute, or
        relative to the workspace) for access ("read", "write" or
        "execute"), and how to allow it; nothing is run or tried."""
        return cast(Explanation, self._json("POST", "/v1/explain", {"path": path, "access": access}))

    def list(self, path: str = ".") -> List[FileInfo]:
        """The directory's entries, each a FileInfo (a symlink as itself)."""
        return cast("List[FileInfo]", self._json("POST", "/v1/files/list", {"path": path})["entries"])

    def policy(self) -> ServerPolicy:
        """The policy the server's commands run under: its runtime.Policy
        as its flags and --policy file say it, its --kill-after and its
        --grantable ceiling."""
        return cast(ServerPolicy, self._json("GET", "/v1/policy"))

    def reload(self) -> Reloaded:
        """Has the server read its policy again (its flags and --policy
        file, as SIGHUP does): commands started after it run under the new
        policy, those running keep theirs. A policy that does not build
        raises HutchError, and the old one stays in effect."""
        return cast(Reloaded, self._json("POST", "/v1/policy/reload", {}))

    # Approvals: the server's judgment of an agent's tool call, read-only.
    # No call adds, revokes or lists grants: consent is the user's to
    # keep (hutch grants), not the agent's it judges.

    def decide(self, tool: str, arg: Optional[str] = None, agent: Optional[str] = None,
               workspace: Optional[str] = None) -> Verdict:
        """Judges a call of tool with argument arg (a shell tool's command
        line, judged command by command; a file tool's path) by agent in
        workspace, as hutch grants decide does: by the server's --rules and
        the remembered grants of its --grants-db. A "prompt" is the
        caller's to put to the user."""
        return cast(Verdict, self._json("POST", "/v1/approvals/decide", _decide_body(tool, arg, agent, workspace)))

    def approval_rules(self) -> List[ApprovalRule]:
        """The tools' rules in effect, sorted by tool, as hutch grants rules
        --json prints them; a tool not listed is prompted at high danger."""
        return cast("List[ApprovalRule]", self._json("GET", "/v1/approvals/rules")["rules"])

    # Durable processes: they outlive the server; the next one over the
    # same --data-dir lists and stops them.

    def start_process(self, argv: Optional[StrList] = None, command: Optional[str] = None, cwd: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None, name: Optional[str] = None,
                      restart: Optional[str] = None, allowed_domains: Optional[StrList] = None,
                      package_managers: Optional[StrList] = None, grant: Optional[StrList] = None,
                      publish: Optional[StrList] = None, explain: bool = False) -> ProcessRecord:
        """Starts a durable process; returns its record (id, status, pid...).
        restart is "always" (the default), "on-failure" or "never".
        publish (["0:8000"], as hutch process start --publish) makes its
        ports reachable on the host's loopback, across its restarts: the
        record's "published" holds the host ports chosen. explain appends
        to its log, at the end of each run, what the run was refused
        ("hutch: refused ..."); the record's runs hold it either way."""
        body = _start_body(argv, command, cwd, env, name, restart, allowed_domains, package_managers, grant,
                           publish, explain)
        return cast(ProcessRecord, self._json("POST", "/v1/processes/start", body))

    def processes(self) -> List[ProcessRecord]:
        return cast("List[ProcessRecord]", self._json("GET", "/v1/processes")["processes"])

    def get_process(self, id: str) -> ProcessRecord:
        return cast(ProcessRecord, self._json("POST", "/v1/processes/get", {"id": id}))

    def stop_process(self, id: str) -> ProcessRecord:
        """Stops it (SIGTERM, SIGKILL after the server's --kill-after) and
        returns its record once it is gone."""
        return cast(ProcessRecord, self._json("POST", "/v1/processes/stop", {"id": id}))

    def stop_all_processes(self) -> List[ProcessRecord]:
        answer = self._json("POST", "/v1/processes/stop-all", {})
        return cast("List[ProcessRecord]", answer["processes"])

    def process_logs(self, id: str, tail_bytes: Optional[int] = None) -> ProcessLogs:
        """Its log (stdout and stderr as written): a dict with "content"
        (text) or "content_base64", "length" and "truncated"."""
        return cast(ProcessLogs, self._json("POST", "/v1/processes/logs", _logs_body(id, tail_bytes)))

    def remove_process(self, id: str) -> Removed:
        """Forgets a stopped process's record and log (HutchError 409
        active while it runs)."""
        return cast(Removed, self._json("POST", "/v1/processes/remove", {"id": id}))


def __getattr__(name: str) -> Any:
    # hutch_client.AsyncSandbox, imported only when asked for.
    if name == "AsyncSandbox":
        from .aio import AsyncSandbox
        return AsyncSandbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
