"""hutch_client for asyncio: AsyncSandbox has Sandbox's methods as
coroutines, over asyncio's streams on the unix socket (those of
asyncio.open_unix_connection), with HTTP/1.1 written and read here: the
standard library has no asyncio HTTP client.

    from hutch_client.aio import AsyncSandbox

    async def main():
        async with AsyncSandbox("/run/user/1000/hutch/hutch.sock") as sb:
            r = await sb.exec(command="make test", timeout_ms=60000,
                              on_output=lambda stream, data: print(data.decode(), end=""))
            r.exit_code, r.stdout, r.result["wall_ns"]
            await sb.write("/abs/path/in/workspace.txt", "text")
            await asyncio.gather(*(sb.exec(argv=["make", t]) for t in ("a", "b")))

A call whose answer was read to its end leaves its connection open for
the next call of the same event loop (at most four kept per loop; aclose(),
or leaving an async with block, ends them). Calls side by side each have a
connection. A call that is cancelled (asyncio.wait_for, a task's cancel())
or left early (an exec_stream closed before its result) closes its own,
and the server stops the command it ran, as hutch run --timeout would.
"""

import asyncio
import inspect
import json
import socket
import threading
import weakref
from typing import (
    Any,
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from . import (
    ApprovalRule,
    ExecEvent,
    ExecResult,
    Explanation,
    FileInfo,
    Health,
    HutchError,
    ProcessLogs,
    ProcessRecord,
    ReadResult,
    Reloaded,
    Removed,
    ServerPolicy,
    Stdin,
    StrList,
    Verdict,
    Version,
    _decide_body,
    _error,
    _event,
    _exec_body,
    _exec_result,
    _framing,
    _logs_body,
    _MAX_IDLE,
    _read_body,
    _request_bytes,
    _start_body,
    _truncated,
    _whole_lines,
    _write_body,
)

__all__ = ["AsyncSandbox", "OnOutput"]

#: Receives each chunk of output as it arrives: ("stdout" or "stderr",
#: bytes); it may be a coroutine function, awaited before the next chunk
#: is read.
OnOutput = Callable[[str, bytes], Union[Awaitable[Any], Any]]

T = TypeVar("T")

# A response's head (status line and headers) is at most this big.
_MAX_HEAD = 64 << 10


class _Response:
    """An HTTP/1.1 response being read: its status and headers, then its
    body by Content-Length, chunked, or up to the end of the connection."""

    def __init__(self, sb: "AsyncSandbox", reader: asyncio.StreamReader, status: int,
                 headers: Dict[str, str]) -> None:
        self._sb, self._reader, self.status, self.headers = sb, reader, status, headers
        # ended: the body was read to its end by its framing (length or
        # chunks), so the connection can carry another request.
        self.ended = False
        self._chunked, self._left = _framing(status, headers)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        r, wait = self._reader, self._sb._wait
        try:
            if self._chunked:
                while True:
                    size_line = await wait(r.readuntil(b"\r\n"))
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        # Trailers, up to the empty line.
                        while (await wait(r.readuntil(b"\r\n"))) != b"\r\n":
                            pass
                        self.ended = True
                        return
                    data = await wait(r.readexactly(size))
                    await wait(r.readexactly(2))
                    yield data
            elif self._left is not None:
                while self._left > 0:
                    data = await wait(r.read(min(self._left, 1 << 16)))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", self._left)
                    self._left -= len(data)
                    yield data
                self.ended = True
            else:
                while True:
                    data = await wait(r.read(1 << 16))
                    if not data:
                        return
                    yield data
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            raise HutchError(self.status, "truncated", "the response ended early or is not HTTP/1.1") from None

    async def read(self) -> bytes:
        out = bytearray()
        async for data in self.chunks():
            out += data
        return bytes(out)

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines (ndjson), each as soon as it is whole."""
        buf = bytearray()
        async for data in self.chunks():
            buf += data
            for line in _whole_lines(buf):
                yield line
        if buf:
            yield bytes(buf)


def _retrieve(f: "asyncio.Future[Any]") -> None:
    # An exception of a step that was cancelled or timed out is no news
    # (and is not to be logged as never retrieved).
    if not f.cancelled():
        f.exception()


class _Reader(asyncio.StreamReader):
    """A StreamReader that reads a reset as the end. The server resets a
    connection it closes with bytes of ours unread (a command's stdin it
    did not read all of), after what it sent, which the kernel gives
    first; asyncio's own would drop those bytes, unread, for the error."""

    def buffered(self) -> int:
        """The bytes received and not yet read."""
        return len(self._buffer)

    def set_exception(self, exc: Exception) -> None:
        if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            self.feed_eof()  # a response cut short is told by its framing
        else:
            super().set_exception(exc)


async def _open(path: str) -> "_Call":
    """asyncio.open_unix_connection(path), with a _Reader, on a socket the
    _Call holds too: a connection kept by a loop since closed is closed
    through it (the transport can no longer be)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, path)
        reader = _Reader(limit=_MAX_HEAD, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.create_unix_connection(lambda: protocol, sock=sock)
    except BaseException:
        sock.close()
        raise
    return _Call(loop, sock, reader, asyncio.StreamWriter(transport, protocol, reader, loop))


class _Stale(Exception):
    """A kept connection the server had closed (its idle timeout, a
    restart) refused the request as it was written: it is sent again on a
    new connection. Once a request is sent, a failure is never retried:
    the server may have run the command."""


class _Call:
    """One request's connection: its stream, and the stdin sent beside the
    response's reading. A connection kept between calls is a _Call too."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.loop, self.sock, self.reader, self.writer = loop, sock, reader, writer
        self.stdin_task: "Optional[asyncio.Future[None]]" = None
        self.stdin_sock: Optional[socket.socket] = None

    def idle(self) -> bool:
        """Whether a kept connection can carry a request: the server has
        not closed it, and it has nothing to read (an idle connection that
        has is out of step)."""
        r = cast(_Reader, self.reader)
        if self.writer.is_closing() or r.at_eof() or r.buffered():
            return False
        # What the loop has not yet seen: a look at the socket itself (it
        # is non-blocking), which reads nothing.
        try:
            self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True  # nothing to read: idle
        except OSError:
            pass
        return False  # the server's end (b""), or bytes out of step

    def drop(self) -> None:
        """Closes a kept connection from any thread, its loop running,
        stopped or closed."""
        if self.loop.is_closed():
            self.sock.close()  # the transport's too: its loop is gone
            return
        try:
            self.loop.call_soon_threadsafe(self.writer.transport.abort)
        except RuntimeError:  # closed in between
            self.sock.close()

    def send_stdin(self, data: bytes) -> None:
        # Through a socket of its own on the same connection (a dup): the
        # server stops reading once the command ends, and the write it
        # then refuses would close the stream, losing the result that came
        # first.
        sock = self.writer.get_extra_info("socket").dup()
        self.stdin_sock = sock

        async def send() -> None:
            try:
                await asyncio.get_running_loop().sock_sendall(sock, data)
            except OSError:
                pass  # the server stopped reading: the command has ended

        self.stdin_task = asyncio.ensure_future(send())

    async def close(self) -> None:
        try:
            if self.stdin_task is not None:
                self.stdin_task.cancel()
                await asyncio.wait([self.stdin_task])
        finally:
            if self.stdin_sock is not None:
                self.stdin_sock.close()
            self.writer.close()
        try:
            await self.writer.wait_closed()
        except Exception:
            pass  # closed: whatever the peer did last is no news


def _drop_all(idle: List[_Call], lock: threading.Lock) -> None:
    with lock:
        calls = idle[:]
        idle.clear()
    for call in calls:
        call.drop()


class AsyncSandbox:
    """The sandbox a hutch serve process on socket_path runs commands in,
    for asyncio. A call read to its end leaves its connection for the next
    call in the same event loop (at most four kept per loop); aclose(), as
    leaving an async with block does, ends them. An AsyncSandbox may be
    shared between tasks, and between event loops: each loop's calls use
    that loop's connections only."""

    socket_path: str
    timeout: Optional[float]

    def __init__(self, socket_path: str, timeout: Optional[float] = None) -> None:
        # timeout bounds each connect, write and read (asyncio.TimeoutError),
        # not a command (timeout_ms).
        self.socket_path, self.timeout = socket_path, timeout
        self._idle: List[_Call] = []
        self._idle_lock = threading.Lock()
        # An AsyncSandbox dropped unclosed closes what it kept all the same.
        self._finalizer = weakref.finalize(self, _drop_all, self._idle, self._idle_lock)

    async def aclose(self) -> None:
        """Closes the connections kept for later calls: this loop's at
        once, other loops' as those loops next run."""
        loop = asyncio.get_running_loop()
        with self._idle_lock:
            calls = self._idle[:]
            self._idle.clear()
        for call in calls:
            if call.loop is loop:
                await call.close()
            else:
                call.drop()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _kept(self) -> Optional[_Call]:
        """A connection this loop kept that the server has not closed, or
        None. Those of loops since closed are closed on the way."""
        loop = asyncio.get_running_loop()
        with self._idle_lock:
            gone = [c for c in self._idle if c.loop.is_closed()]
            self._idle[:] = [c for c in self._idle if not c.loop.is_closed()]
            mine = [c for c in self._idle if c.loop is loop]
            self._idle[:] = [c for c in self._idle if c.loop is not loop]
        for c in gone:
            c.drop()
        while mine:
            c = mine.pop()
            if c.idle():
                with self._idle_lock:
                    self._idle.extend(mine)
                return c
            c.writer.transport.abort()
        return None

    async def _release(self, call: _Call, resp: Optional[_Response]) -> None:
        """Ends a call: its connection is kept for the next call if its
        answer was read to its end and the server keeps it open, else
        closed (which stops a command still running)."""
        if (resp is not None and resp.ended and call.stdin_task is None and call.idle()
                and resp.headers.get("connection", "").lower() != "close"):
            with self._idle_lock:
                if sum(c.loop is call.loop for c in self._idle) < _MAX_IDLE:
                    self._idle.append(call)
                    return
        await call.close()

    async def _wait(self, aw: Awaitable[T]) -> T:
        """aw, within self.timeout (asyncio.TimeoutError)."""
        if self.timeout is None:
            return await aw
        # Not asyncio.wait_for: before Python 3.12 it returns aw's result
        # when aw ends as the call is cancelled, and the cancel is lost
        # (the command would run on).
        inner = asyncio.ensure_future(aw)
        inner.add_done_callback(_retrieve)
        try:
            done, _ = await asyncio.wait({inner}, timeout=self.timeout)
        except BaseException:
            inner.cancel()
            raise
        if not done:
            inner.cancel()
            await asyncio.wait({inner})
            if inner.cancelled():
                raise asyncio.TimeoutError()
        return inner.result()

    async def _request(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                       stdin_bytes: Optional[bytes] = None) -> Tuple[_Call, _Response]:
        # A call sending stdin has a connection of its own: a task sends on
        # it while the answer is read.
        call = self._kept() if stdin_bytes is None else None
        if call is not None:
            try:
                return await self._send(call, method, path, body, stdin_bytes, kept=True)
            except _Stale:
                pass
        call = await self._wait(_open(self.socket_path))
        return await self._send(call, method, path, body, stdin_bytes)

    async def _send(self, call: _Call, method: str, path: str, body: Optional[Dict[str, Any]],
                    stdin_bytes: Optional[bytes], kept: bool = False) -> Tuple[_Call, _Response]:
        reader, writer = call.reader, call.writer
        try:
            try:
                # The command's stdin, if any, is written beside the
                # response's reading: a command that does not read it all
                # ends all the same.
                writer.write(_request_bytes(method, path, body, stdin_bytes))
                await self._wait(writer.drain())
            except (BrokenPipeError, ConnectionResetError) as e:
                if kept:
                    raise _Stale() from e
                raise
            if stdin_bytes:
                call.send_stdin(stdin_bytes)
            status, headers = await self._head(reader)
            resp = _Response(self, reader, status, headers)
        except BaseException:
            await call.close()
            raise
        if status >= 400:
            try:
                answer = await resp.read()
            except BaseException:
                await call.close()
                raise
            await self._release(call, resp)
            raise _error(status, answer)
        return call, resp

    async def _head(self, reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str]]:
        size = 0
        while True:
            try:
                line = await self._wait(reader.readuntil(b"\r\n"))
                parts = line.decode("latin-1").split(None, 2)
                if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                    raise ValueError(line)
                status = int(parts[1])
                headers: Dict[str, str] = {}
                while True:
                    h = await self._wait(reader.readuntil(b"\r\n"))
                    size += len(h)
                    if size > _MAX_HEAD:
                        raise ValueError("response head too large")
                    if h == b"\r\n":
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
                raise HutchError(0, "http", "not an HTTP/1.1 response: %s" % e) from None
            if status >= 200:  # 1xx: another head follows
                return status, headers

    async def _json(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        call, resp = await self._request(method, path, body)
        done: Optional[_Response] = None
        try:
            answer = json.loads(await resp.read())
            done = resp
            return answer
        finally:
            await self._release(call, done)

    async def health(self) -> Health:
        return cast(Health, await self._json("GET", "/v1/health"))

    async def version(self) -> Version:
        return cast(Version, await self._json("GET", "/v1/version"))

    async def exec_stream(self, argv: Optional[StrList] = None, command: Optional[str] = None,
                          cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                          stdin: Optional[Stdin] = None, timeout_ms: Optional[int] = None,
                          allowed_domains: Optional[StrList] = None, package_managers: Optional[StrList] = None,
                          grant: Optional[StrList] = None, publish: Optional[StrList] = None,
                          reach: Optional[StrList] = None, explain: bool = False) -> AsyncGenerator[ExecEvent, None]:
        """Yields the exec's events as they come: ("stdout", bytes),
        ("stderr", bytes), then ("result", ResultEvent) last. Closing the
        generator early (contextlib.aclosing, or its aclose()) closes the
        connection, which stops the command. With publish, as
        Sandbox.exec_stream: ("published", [Published]) first; reach and
        explain as there."""
        body, stdin_bytes = _exec_body(argv, command, cwd, env, stdin, timeout_ms, allowed_domains,
                                       package_managers, grant, publish, reach, explain)
        call, resp = await self._request("POST", "/v1/exec", body, stdin_bytes)
        done: Optional[_Response] = None
        try:
            lines = resp.lines()
            async for line in lines:
                ev = _event(line)
                if ev is None:
                    continue
                if ev[0] == "result":
                    # The body's end follows the result at once: read, it
                    # leaves the connection for the next call.
                    async for _ in lines:
                        pass
                    done = resp
                    yield ev
                    return
                yield ev
            raise _truncated(resp.status)
        finally:
            await self._release(call, done)

    async def exec(self, argv: Optional[StrList] = None, command: Optional[str] = None, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None, stdin: Optional[Stdin] = None,
                   timeout_ms: Optional[int] = None, allowed_domains: Optional[StrList] = None,
                   package_managers: Optional[StrList] = None, grant: Optional[StrList] = None,
                   on_output: Optional[OnOutput] = None, publish: Optional[StrList] = None,
                   reach: Optional[StrList] = None, explain: bool = False) -> ExecResult:
        """Runs a command (argv, or command as sh -c) and returns its
        ExecResult, as Sandbox.exec does. on_output(stream, data_bytes),
        if given, sees each chunk as it arrives; when it returns an
        awaitable, that is awaited before the next chunk is read."""
        out, err = bytearray(), bytearray()
        events = self.exec_stream(argv, command, cwd, env, stdin, timeout_ms, allowed_domains,
                                  package_managers, grant, publish, reach, explain)
        try:
            async for ev in events:
                if ev[0] == "result":
                    return _exec_result(ev[1], out, err)
                if ev[0] == "published":
                    continue  # in the result's "published" too
                t, data = ev
                (out if t == "stdout" else err).extend(data)
                if on_output is not None:
                    r = on_output(t, data)
                    if inspect.isawaitable(r):
                        await r
        finally:
            # At once, not when the generator is collected: an on_output
            # that raised leaves the command stopped.
            await events.aclose()
        raise _truncated(0)  # exec_stream raises first

    async def read(self, path: str, offset: Optional[int] = None, limit: Optional[int] = None,
                   mode: Optional[str] = None, no_follow: bool = False) -> ReadResult:
        """As Sandbox.read."""
        return cast(ReadResult, await self._json("POST", "/v1/files/read",
                                                 _read_body(path, offset, limit, mode, no_follow)))

    async def write(self, path: str, content: Union[str, bytes, bytearray, memoryview], append: bool = False,
                    perm: Union[int, str, None] = None, no_follow: bool = False) -> FileInfo:
        """As Sandbox.write."""
        return cast(FileInfo, await self._json("POST", "/v1/files/write",
                                               _write_body(path, content, append, perm, no_follow)))

    async def stat(self, path: str) -> FileInfo:
        """As Sandbox.stat: "type", and "mode" the POSIX st_mode."""
        return cast(FileInfo, await self._json("POST", "/v1/files/stat", {"path": path}))

    async def explain(self, path: str, access: str = "read") -> Explanation:
        """As Sandbox.explain."""
        return cast(Explanation, await self._json("POST", "/v1/explain", {"path": path, "access": access}))

    async def list(self, path: str = ".") -> List[FileInfo]:
        return cast("List[FileInfo]", (await self._json("POST", "/v1/files/list", {"path": path}))["entries"])

    async def policy(self) -> ServerPolicy:
        """As Sandbox.policy."""
        return cast(ServerPolicy, await self._json("GET", "/v1/policy"))

    async def reload(self) -> Reloaded:
        """As Sandbox.reload."""
        return cast(Reloaded, await self._json("POST", "/v1/policy/reload", {}))

    async def decide(self, tool: str, arg: Optional[str] = None, agent: Optional[str] = None,
                     workspace: Optional[str] = None) -> Verdict:
        """As Sandbox.decide: the judgment of a tool call, read-only."""
        body = _decide_body(tool, arg, agent, workspace)
        return cast(Verdict, await self._json("POST", "/v1/approvals/decide", body))

    async def approval_rules(self) -> List[ApprovalRule]:
        """As Sandbox.approval_rules."""
        return cast("List[ApprovalRule]", (await self._json("GET", "/v1/approvals/rules"))["rules"])

    async def start_process(self, argv: Optional[StrList] = None, command: Optional[str] = None,
                            cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                            name: Optional[str] = None, restart: Optional[str] = None,
                            allowed_domains: Optional[StrList] = None, package_managers: Optional[StrList] = None,
                            grant: Optional[StrList] = None, publish: Optional[StrList] = None,
                            explain: bool = False) -> ProcessRecord:
        """As Sandbox.start_process."""
        body = _start_body(argv, command, cwd, env, name, restart, allowed_domains, package_managers, grant,
                           publish, explain)
        return cast(ProcessRecord, await self._json("POST", "/v1/processes/start", body))

    async def processes(self) -> List[ProcessRecord]:
        return cast("List[ProcessRecord]", (await self._json("GET", "/v1/processes"))["processes"])

    async def get_process(self, id: str) -> ProcessRecord:
        return cast(ProcessRecord, await self._json("POST", "/v1/processes/get", {"id": id}))

    async def stop_process(self, id: str) -> ProcessRecord:
        return cast(ProcessRecord, await self._json("POST", "/v1/processes/stop", {"id": id}))

    async def stop_all_processes(self) -> List[ProcessRecord]:
        answer = await self._json("POST", "/v1/processes/stop-all", {})
        return cast("List[ProcessRecord]", answer["processes"])

    async def process_logs(self, id: str, tail_bytes: Optional[int] = None) -> ProcessLogs:
        return cast(ProcessLogs, await self._json("POST", "/v1/processes/logs", _logs_body(id, tail_bytes)))

    async def remove_process(self, id: str) -> Removed:
        return cast(Removed, await self._json("POST", "/v1/processes/remove", {"id": id}))
