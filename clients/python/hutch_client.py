"""A client of hutch's local API (hutch serve), standard library only.

    sb = Sandbox("/run/user/1000/hutch/hutch.sock")
    r = sb.exec(command="make test", cwd="src", timeout_ms=60000, env={"CI": "1"})
    r.exit_code, r.stdout, r.stderr, r.result   # result: the runtime.Result, a dict
    sb.read("notes.md")                          # {"content": ..., "path": ..., ...}
    sb.write("/abs/path/in/workspace.txt", "text")

The protocol is JSON over HTTP/1.1 on a unix socket (see hutch's README,
"Local API: hutch serve"); a refusal comes back as HutchError with the
server's code, message and field.
"""

import base64
import http.client
import json
import socket

__all__ = ["Sandbox", "ExecResult", "HutchError", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1


class HutchError(Exception):
    """An error response: status is the HTTP status, code the API's word
    for it (bad_request, denied, private, not_found, ...), field the
    request's field at fault, if one is."""

    def __init__(self, status, code, message, field=None):
        super().__init__(f"{code}: {field + ': ' if field else ''}{message}")
        self.status, self.code, self.message, self.field = status, code, message, field


class ExecResult:
    """A finished command: exit_code is hutch run's exit status (the
    command's, 128+N for signal N, 126/127 not executable/not found),
    result the full runtime.Result as a dict."""

    def __init__(self, exit_code, stdout, stderr, result, error=None, stdout_bytes=None, stderr_bytes=None):
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr
        self.result, self.error = result, error
        # The output exactly as the command wrote it (stdout and stderr
        # are decoded as UTF-8, invalid bytes replaced).
        self.stdout_bytes = stdout.encode() if stdout_bytes is None else stdout_bytes
        self.stderr_bytes = stderr.encode() if stderr_bytes is None else stderr_bytes

    @property
    def killed(self):
        return bool(self.result.get("killed"))

    @property
    def kill_reason(self):
        return self.result.get("kill_reason", "")

    def __repr__(self):
        return f"ExecResult(exit_code={self.exit_code!r}, killed={self.killed!r})"


class _UnixConnection(http.client.HTTPConnection):
    """HTTPConnection over a unix socket: the host name is only for the
    Host header."""

    def __init__(self, path, timeout):
        super().__init__("hutch", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Sandbox:
    """The sandbox a hutch serve process on socket_path runs commands in.
    Each call is one connection; a Sandbox may be shared between threads."""

    def __init__(self, socket_path, timeout=None):
        # timeout bounds each socket operation, not a command (timeout_ms).
        self.socket_path, self.timeout = socket_path, timeout

    def _request(self, method, path, body=None, stdin_bytes=None):
        conn = _UnixConnection(self.socket_path, self.timeout)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if stdin_bytes is not None:
            # The request's JSON, then at once the command's stdin,
            # bytes as they are (the API's Hutch-Stdin: stream).
            headers["Hutch-Stdin"] = "stream"
            data += bytes(stdin_bytes)
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        if resp.status >= 400:
            raw = resp.read()
            conn.close()
            try:
                e = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                raise HutchError(resp.status, "http", raw.decode("utf-8", "replace")) from None
            raise HutchError(resp.status, e.get("code", ""), e.get("message", ""), e.get("field"))
        return conn, resp

    def _json(self, method, path, body=None):
        conn, resp = self._request(method, path, body)
        try:
            return json.loads(resp.read())
        finally:
            conn.close()

    def health(self):
        return self._json("GET", "/v1/health")

    def version(self):
        return self._json("GET", "/v1/version")

    def exec_stream(self, argv=None, command=None, cwd=None, env=None, stdin=None, timeout_ms=None,
                    allowed_domains=None, package_managers=None, grant=None):
        """Yields the exec's events as they come: ("stdout", bytes),
        ("stderr", bytes), then ("result", ExecResult) last. stdin is
        text (str) or bytes, sent as they are."""
        body = _command(argv, command, cwd, env, allowed_domains, package_managers, grant)
        stdin_bytes = None
        if isinstance(stdin, (bytes, bytearray, memoryview)):
            stdin_bytes, stdin = stdin, None
        for k, v in (("stdin", stdin), ("timeout_ms", timeout_ms)):
            if v is not None:
                body[k] = v
        conn, resp = self._request("POST", "/v1/exec", body, stdin_bytes)
        try:
            for line in resp:
                ev = json.loads(line)
                t = ev["type"]
                if t in ("stdout", "stderr"):
                    data = ev.get("data", "")
                    yield t, base64.b64decode(data) if ev.get("base64") else data.encode()
                elif t == "result":
                    yield t, ev
                    return
            raise HutchError(resp.status, "truncated", "the response ended before the result")
        finally:
            conn.close()

    def exec(self, argv=None, command=None, cwd=None, env=None, stdin=None, timeout_ms=None,
             allowed_domains=None, package_managers=None, grant=None, on_output=None):
        """Runs a command (argv, or command as sh -c) and returns its
        ExecResult, stdout and stderr decoded as UTF-8 (invalid bytes
        replaced; stdout_bytes and stderr_bytes hold them as written). allowed_domains, package_managers and grant (permission
        tags) ask for more than the server's policy, within its
        --grantable ceiling (HutchError not_permitted otherwise).
        on_output(stream, data_bytes), if given, sees each chunk as it
        arrives."""
        out, err = bytearray(), bytearray()
        for t, v in self.exec_stream(argv, command, cwd, env, stdin, timeout_ms,
                                     allowed_domains, package_managers, grant):
            if t == "result":
                return ExecResult(v["exit_status"], out.decode("utf-8", "replace"),
                                  err.decode("utf-8", "replace"), v["result"], v.get("error"),
                                  bytes(out), bytes(err))
            (out if t == "stdout" else err).extend(v)
            if on_output is not None:
                on_output(t, v)
        raise HutchError(0, "truncated", "no result")  # exec_stream raises first

    def read(self, path, offset=None, limit=None, mode=None, no_follow=False):
        """The file as a command of the sandbox would see it: a dict with
        "content" (text) or "content_base64", and path, host_path, size..."""
        body = {"path": path}
        for k, v in (("offset", offset), ("limit", limit), ("mode", mode)):
            if v is not None:
                body[k] = v
        if no_follow:
            body["no_follow"] = True
        return self._json("POST", "/v1/files/read", body)

    def write(self, path, content, append=False, perm=None, no_follow=False):
        """Writes content (str, or bytes) to the absolute path, as a command
        of the sandbox could; returns the file's info."""
        body = {"path": path}
        if isinstance(content, (bytes, bytearray)):
            body["content_base64"] = base64.b64encode(content).decode()
        else:
            body["content"] = content
        if append:
            body["append"] = True
        if perm is not None:
            body["perm"] = perm
        if no_follow:
            body["no_follow"] = True
        return self._json("POST", "/v1/files/write", body)

    def stat(self, path):
        return self._json("POST", "/v1/files/stat", {"path": path})

    def list(self, path="."):
        return self._json("POST", "/v1/files/list", {"path": path})["entries"]

    def reload(self):
        """Has the server read its policy again (as SIGHUP does)."""
        return self._json("POST", "/v1/policy/reload", {})

    # Durable processes: they outlive the server; the next one over the
    # same --data-dir lists and stops them.

    def start_process(self, argv=None, command=None, cwd=None, env=None, name=None, restart=None,
                      allowed_domains=None, package_managers=None, grant=None):
        """Starts a durable process; returns its record (id, status, pid...).
        restart is "always" (the default), "on-failure" or "never"."""
        body = _command(argv, command, cwd, env, allowed_domains, package_managers, grant)
        for k, v in (("name", name), ("restart", restart)):
            if v is not None:
                body[k] = v
        return self._json("POST", "/v1/processes/start", body)

    def processes(self):
        return self._json("GET", "/v1/processes")["processes"]

    def get_process(self, id):
        return self._json("POST", "/v1/processes/get", {"id": id})

    def stop_process(self, id):
        """Stops it (SIGTERM, SIGKILL after the server's --kill-after) and
        returns its record once it is gone."""
        return self._json("POST", "/v1/processes/stop", {"id": id})

    def stop_all_processes(self):
        return self._json("POST", "/v1/processes/stop-all", {})["processes"]

    def process_logs(self, id, tail_bytes=None):
        """Its log (stdout and stderr as written): a dict with "content"
        (text) or "content_base64", "length" and "truncated"."""
        body = {"id": id}
        if tail_bytes is not None:
            body["tail_bytes"] = tail_bytes
        return self._json("POST", "/v1/processes/logs", body)

    def remove_process(self, id):
        """Forgets a stopped process's record and log."""
        return self._json("POST", "/v1/processes/remove", {"id": id})


def _command(argv, command, cwd, env, allowed_domains, package_managers, grant):
    """The request's fields for what runs, those given only."""
    body = {}
    for k, v in (("argv", argv), ("command", command), ("cwd", cwd), ("env", env),
                 ("allowed_domains", allowed_domains), ("package_managers", package_managers),
                 ("grant", grant)):
        if v is None:
            continue
        if k in ("argv", "allowed_domains", "package_managers", "grant"):
            if isinstance(v, (str, bytes)):
                # list("ls") would run ["l", "s"].
                raise TypeError(f"{k} must be a list of strings, not {type(v).__name__} {v!r}"
                                + (": give [" + repr(v) + "], or command=" + repr(v) if k == "argv" else ""))
            v = list(v)
        body[k] = v
    return body
