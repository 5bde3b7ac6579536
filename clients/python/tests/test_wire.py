"""The HTTP/1.1 both clients speak, against a fake server on a unix socket
that answers each connection with bytes written here: framings hutch
serve's Go server may use (Content-Length, chunked with extensions and
trailers, Connection: close, an interim 100), answers cut short, errors
that are not JSON, and the requests the clients send. Needs no hutch.
"""

import asyncio
import json
import os
import shutil
import socket
import tempfile
import threading
import unittest
from unittest import mock

from hutch_client import HutchError, Sandbox
from hutch_client.aio import AsyncSandbox


def chunked(*parts, trailer=b""):
    out = b""
    for i, p in enumerate(parts):
        ext = b";x=y" if i == 0 else b""
        out += b"%x%s\r\n%s\r\n" % (len(p), ext, p)
    return out + b"0\r\n" + trailer + b"\r\n"


def ndjson(*events):
    return [json.dumps(e).encode() + b"\n" for e in events]


RESULT = {"type": "result", "exit_status": 3, "result": {"exit_code": 3, "wall_ns": 5, "startup_ns": 1,
                                                         "killed": False, "layers": [], "level": "x",
                                                         "network": "none"}}


class FakeServer:
    """Answers each connection, in turn, with the next of answers, once it
    has read the request (head and Content-Length body), which it keeps."""

    def __init__(self, answers):
        self.dir = tempfile.mkdtemp(prefix="hutch-py-wire-")
        self.path = os.path.join(self.dir, "s")
        self.answers = list(answers)
        self.requests = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        for answer in self.answers:
            conn, _ = self.sock.accept()
            with conn:
                f = conn.makefile("rb")
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = f.readline()
                    if not line:
                        break
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                self.requests.append((head.decode("latin-1"), f.read(length)))
                conn.sendall(answer)
                f.close()

    def close(self):
        self.thread.join(10)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class WireTest(unittest.TestCase):
    def both(self, answer, call):
        """call(sandbox) with each client, each given its own copy of
        answer (a list of responses): [(sync's value or exception, its
        requests), (aio's...)]."""
        out = []
        for kind in ("sync", "aio"):
            srv = FakeServer(answer)
            try:
                try:
                    if kind == "sync":
                        v = call(Sandbox(srv.path, timeout=10))
                    else:
                        async def run():
                            r = call(AsyncSandbox(srv.path, timeout=10))
                            return await r
                        v = asyncio.run(run())
                except Exception as e:
                    v = e
            finally:
                srv.close()
            out.append((v, srv.requests))
        return out

    def test_content_length_and_connection_close(self):
        body = b'{"status": "ok", "workspace": "/w", "prewarmed": 0}'
        answer = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body)]
        for v, reqs in self.both(answer, lambda sb: sb.health()):
            self.assertEqual(v, {"status": "ok", "workspace": "/w", "prewarmed": 0})
            self.assertTrue(reqs[0][0].startswith("GET /v1/health HTTP/1.1\r\n"), reqs)

    def test_to_the_end_of_the_connection(self):
        answer = [b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"protocol": 1, "hutch_version": "v"}']
        for v, _ in self.both(answer, lambda sb: sb.version()):
            self.assertEqual(v, {"protocol": 1, "hutch_version": "v"})

    def test_chunked_with_interim_response(self):
        answer = [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + chunked(b'{"entries": [{"path": "/w/a",', b' "type": "dir", "mode": 16877}]}',
                            trailer=b"X-T: 1\r\n")]
        for v, reqs in self.both(answer, lambda sb: sb.list("a")):
            self.assertEqual(v, [{"path": "/w/a", "type": "dir", "mode": 16877}])
            self.assertEqual(json.loads(reqs[0][1]), {"path": "a"})

    def test_exec_events(self):
        lines = ndjson({"type": "started"}, {"type": "stdout", "data": "héllo\n"},
                       {"type": "stderr", "data": "/w==", "base64": True}, {"type": "later", "x": 1}, RESULT)
        # A line split over chunks, and two lines in one.
        body = b"".join(lines)
        answer = [b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + chunked(body[:7], body[7:40], body[40:])]
        seen = []
        for v, reqs in self.both(answer, lambda sb: sb.exec(argv=["x"], on_output=lambda s, d: seen.append((s, d)))):
            self.assertEqual((v.exit_code, v.stdout_bytes, v.stderr_bytes, v.result["wall_ns"]),
                             (3, "héllo\n".encode(), b"\xff", 5), v)
            head, body = reqs[0]
            self.assertTrue(head.startswith("POST /v1/exec HTTP/1.1\r\n"))
            self.assertNotIn("hutch-stdin", head.lower())
            self.assertEqual(json.loads(body), {"argv": ["x"]})
        self.assertEqual(seen, [("stdout", "héllo\n".encode()), ("stderr", b"\xff")] * 2)

    def test_request_in_one_write(self):
        # http.client writes a request's head and its body in two sends; the
        # sync client sends them in one, as the async one does: the server,
        # woken by the head alone, would wait again for the body.
        answer = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*ndjson(RESULT))]
        sends = []
        sendall = socket.socket.sendall

        client = threading.get_ident()

        def recorded(sock, data, *args):
            if threading.get_ident() == client:  # not the fake server's
                sends.append(bytes(data))
            return sendall(sock, data, *args)

        srv = FakeServer(answer)
        try:
            with mock.patch.object(socket.socket, "sendall", recorded):
                v = Sandbox(srv.path, timeout=10).exec(argv=["x"])
        finally:
            srv.close()
        self.assertEqual(v.exit_code, 3)
        self.assertEqual(len(sends), 1, sends)
        self.assertTrue(sends[0].startswith(b"POST /v1/exec HTTP/1.1\r\n"), sends)
        self.assertTrue(sends[0].endswith(b'\r\n\r\n{"argv": ["x"]}'), sends)

    def test_exec_cut_short(self):
        answer = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + b"".join(b"%x\r\n%s\r\n" % (len(x), x) for x in ndjson({"type": "stdout", "data": "a"})),
                  ]
        for v, _ in self.both(answer, lambda sb: sb.exec(command="x")):
            self.assertIsInstance(v, HutchError)
            self.assertEqual(v.code, "truncated")

    def test_stdin_streamed(self):
        answer = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*ndjson(RESULT))]
        stdin = bytes(range(256)) * 4
        for v, reqs in self.both(answer, lambda sb: sb.exec(argv=["cat"], stdin=stdin, timeout_ms=5)):
            self.assertEqual(v.exit_code, 3)
            head, body = reqs[0]
            self.assertIn("hutch-stdin: stream\r\n", head.lower())
            obj = json.dumps({"argv": ["cat"], "timeout_ms": 5}).encode()
            self.assertEqual(body, obj + stdin)

    def test_policy(self):
        body = (b'{"policy": {"Workspace": "/w", "Writable": ["/x"], "Env": null}, "kill_after_ms": 2000,'
                b' "grantable": ["@network"]}')
        answer = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body)]
        for v, reqs in self.both(answer, lambda sb: sb.policy()):
            self.assertEqual(v, json.loads(body))
            self.assertTrue(reqs[0][0].startswith("GET /v1/policy HTTP/1.1\r\n"), reqs)
            self.assertEqual(reqs[0][1], b"")
        body = b'{"status": "reloaded", "workspace": "/w"}'
        answer = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]
        for v, reqs in self.both(answer, lambda sb: sb.reload()):
            self.assertEqual(v, {"status": "reloaded", "workspace": "/w"})
            self.assertTrue(reqs[0][0].startswith("POST /v1/policy/reload HTTP/1.1\r\n"), reqs)
            self.assertEqual(json.loads(reqs[0][1]), {})
        # A handler built without the policy routes answers them as no
        # route: the API's 404 not_found.
        e = b'{"error": {"code": "not_found", "message": "no route /v1/policy; routes: /v1/exec, /v1/health"}}'
        answer = [b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(e), e)]
        for call in (lambda sb: sb.policy(), lambda sb: sb.reload()):
            for v, _ in self.both(answer, call):
                self.assertIsInstance(v, HutchError)
                self.assertEqual((v.status, v.code, v.field), (404, "not_found", None))

    def test_approvals(self):
        body = b'{"decision": "allow", "danger": "high", "reason": "remembered", "grant": 1, "grants": [1, 2]}'
        answer = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body)]
        for v, reqs in self.both(answer, lambda sb: sb.decide("bash", "npm test && ls", agent="coder")):
            self.assertEqual(v, json.loads(body))
            self.assertTrue(reqs[0][0].startswith("POST /v1/approvals/decide HTTP/1.1\r\n"), reqs)
            self.assertEqual(json.loads(reqs[0][1]), {"tool": "bash", "arg": "npm test && ls", "agent": "coder"})
        body = b'{"rules": [{"tool": "bash", "decision": "prompt", "danger": "high", "shell": true}]}'
        answer = [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]
        for v, reqs in self.both(answer, lambda sb: sb.approval_rules()):
            self.assertEqual(v, json.loads(body)["rules"])
            self.assertTrue(reqs[0][0].startswith("GET /v1/approvals/rules HTTP/1.1\r\n"), reqs)
            self.assertEqual(reqs[0][1], b"")

    def test_errors(self):
        e = b'{"error": {"code": "denied", "message": "no", "field": "path"}}'
        answer = [b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s" % (len(e), e)]
        for v, reqs in self.both(answer, lambda sb: sb.write("/w/f", b"\x00", perm=0o600, append=True)):
            self.assertIsInstance(v, HutchError)
            self.assertEqual((v.status, v.code, v.message, v.field), (403, "denied", "no", "path"))
            self.assertEqual(json.loads(reqs[0][1]),
                             {"path": "/w/f", "content_base64": "AA==", "append": True, "perm": "600"})
        answer = [b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 4\r\n\r\noops"]
        for v, _ in self.both(answer, lambda sb: sb.health()):
            self.assertIsInstance(v, HutchError)
            self.assertEqual((v.status, v.code, v.message), (502, "http", "oops"))


if __name__ == "__main__":
    unittest.main()
