"""Tests of hutch_client's Sandbox against a real `hutch serve`
($HUTCH_BIN), each verdict checked on the host: the files the sandbox
wrote or did not, the secrets that did not come back, the processes in the
host's process table.

    HUTCH_BIN=/path/to/hutch python3 -m unittest discover -v -s tests

with the package installed (or PYTHONPATH naming the directory above
tests/). Workspaces are made in $HUTCH_TEST_SCRATCH (default /var/tmp):
see serve_fixture.
"""

import contextlib
import json
import os
import socket
import stat
import time
import unittest
import urllib.request

from hutch_client import HutchError, Sandbox, content_bytes
from serve_fixture import (APPROVAL_CALLS, APPROVAL_GRANTS, APPROVAL_RULES, HANDSHAKE, SECRET, ServeCase,
                           host_pids, server_connection_inodes, unique_sleep)


class ServeTest(ServeCase, unittest.TestCase):
    sb: Sandbox

    def test_health_and_version(self):
        h = self.sb.health()
        self.assertEqual(h["status"], "ok")
        self.assertEqual(h["workspace"], self.ws)
        self.assertEqual(self.sb.version()["protocol"], 1)

    def test_exec_output_and_exit_codes(self):
        r = self.sb.exec(command="echo out; echo err >&2; exit 3")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out\n", "err\n"))
        self.assertEqual(r.result["exit_code"], 3)
        r = self.sb.exec(argv=["sh", "-c", 'echo "$A:$(pwd)"; cat'], cwd=None,
                         env={"A": "b"}, stdin="in")
        self.assertEqual((r.exit_code, r.stdout), (0, "b:%s\nin" % self.ws))
        self.assertEqual(self.sb.exec(argv=["no-such-command-here"]).exit_code, 127)
        self.assertEqual(self.sb.exec(command="kill -9 $$").exit_code, 137)

    def test_argv_must_be_a_list(self):
        with self.assertRaises(TypeError) as cm:
            self.sb.exec(argv="ls")
        self.assertIn("argv", str(cm.exception))
        with self.assertRaises(TypeError):
            self.sb.exec(command="true", grant="@network")
        with self.assertRaises(TypeError) as cm:
            self.sb.exec(command="true", reach="0123456789ab:8000")
        self.assertIn("reach", str(cm.exception))

    def test_reach_unknown_process(self):
        with self.assertRaises(HutchError) as cm:
            self.sb.exec(command="true", reach=["0123456789ab:8000"])
        self.assertEqual(cm.exception.field, "reach")

    def test_binary_stdin_and_stdout(self):
        data = bytes(range(256)) * 64 + b"\xff\xfe\x00end"
        r = self.sb.exec(argv=["cat"], stdin=data)
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout_bytes, data)
        r = self.sb.exec(command="printf 'a\\377b'")
        self.assertEqual(r.stdout_bytes, b"a\xffb")
        self.assertEqual(r.stdout, "a\ufffdb")

    def test_exec_write_lands_in_workspace_only(self):
        inside = os.path.join(self.ws, "from-exec.txt")
        outside = os.path.join(self.outside, "from-exec.txt")
        r = self.sb.exec(command=f"echo inside > {inside}; echo outside > {outside}")
        self.assertNotEqual(r.exit_code, 0)  # the second write fails
        with open(inside) as f:
            self.assertEqual(f.read(), "inside\n")
        self.assertFalse(os.path.exists(outside), "a write outside the workspace reached the host")

    def test_connection_kept(self):
        # Seen from the host: the server's ends of the connections to its
        # socket, by inode (/proc/net/unix). A call read to its end leaves
        # its connection for the next: the same inode serves them all;
        # close() (leaving the with block) ends it. The server closes its
        # end of a connection the client closed a moment later: what is
        # counted after a close is waited for.
        before = server_connection_inodes(self.sock)

        def new():
            return server_connection_inodes(self.sock) - before

        def eventually(cond):
            deadline = time.monotonic() + 10
            while not cond() and time.monotonic() < deadline:
                time.sleep(0.02)
            return cond()

        with Sandbox(self.sock, timeout=60) as sb:
            sb.health()
            first = new()
            self.assertEqual(len(first), 1, first)
            for _ in range(10):
                self.assertEqual(sb.exec(command="echo hi").stdout, "hi\n")
                sb.stat(".")
                with self.assertRaises(HutchError):
                    sb.read("/etc/shadow")
            self.assertEqual(new(), first, "the calls did not all use the first connection")
            # A stream left early closes its connection (the kept one, which
            # it took): its command is stopped.
            arg = unique_sleep()
            events = sb.exec_stream(command="echo x; exec sleep " + arg)
            self.assertEqual(next(events), ("stdout", b"x\n"))
            self.assertTrue(eventually(lambda: host_pids(["sleep", arg])))
            events.close()
            self.assertTrue(eventually(lambda: not host_pids(["sleep", arg])),
                            "the sleep runs on after its stream was closed")
            self.assertTrue(eventually(lambda: not new()), new())
            sb.health()
            kept = new()
            self.assertEqual(len(kept), 1, kept)
        self.assertTrue(eventually(lambda: not new()), "connections left after close: %s" % new())

    def test_kept_connection_closed_by_server(self):
        # The server closes a kept connection (as its idle timeout does):
        # the next call finds it closed and uses a new one.
        with Sandbox(self.sock, timeout=60) as sb:
            sb.health()
            kept = sb._idle[0]
            kept.sock.shutdown(socket.SHUT_RD)  # as if the server had sent EOF
            self.assertEqual(sb.exec(command="echo again").stdout, "again\n")

    def test_explain(self):
        # A write outside the workspace: its refusal is in the result's
        # denials, and with explain on the command's stderr after its
        # own output too.
        outside = os.path.join(self.outside, "explained.txt")
        for explain in (False, True):
            r = self.sb.exec(argv=["touch", outside], explain=explain)
            self.assertEqual([(d["source"], d["op"], d["object"], d["rule"]) for d in r.result["denials"]],
                             [("file", "write", outside, "outside-writable")])
            touched = f"touch: cannot touch '{outside}': Read-only file system\n"
            self.assertTrue(r.stderr.startswith(touched), r.stderr)
            self.assertEqual(r.stderr[len(touched):].startswith(f"hutch: refused write {outside}: "), explain, r.stderr)
            self.assertFalse(os.path.exists(outside), "a write outside the workspace reached the host")

    def test_denied_reads_do_not_come_back(self):
        r = self.sb.exec(command="cat .env; cat /etc/shadow; cat " + self.ws + "/.env")
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        with self.assertRaises(HutchError) as cm:
            self.sb.read(".env")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "denied"))
        self.assertNotIn(SECRET, str(cm.exception))
        with self.assertRaises(HutchError) as cm:
            self.sb.read("/etc/shadow")
        self.assertEqual(cm.exception.code, "denied")
        try:
            with open("/etc/shadow") as f:
                shadow = f.readline().strip()
        except OSError:
            shadow = None  # not ours to read on the host either
        if shadow:
            self.assertNotIn(shadow, r.stdout)

    def test_files_round_trip(self):
        path = os.path.join(self.ws, "dir", "notes.txt")
        info = self.sb.write(path, "héllo\n")
        self.assertEqual(info["host_path"], path)
        with open(path, encoding="utf-8") as f:
            self.assertEqual(f.read(), "héllo\n")
        with open(path, "a") as f:
            f.write("from the host\n")
        self.assertEqual(self.sb.read("dir/notes.txt")["content"], "héllo\nfrom the host\n")
        self.sb.write(os.path.join(self.ws, "b.bin"), b"\x00\xff\x01")
        with open(os.path.join(self.ws, "b.bin"), "rb") as f:
            self.assertEqual(f.read(), b"\x00\xff\x01")
        self.assertEqual(self.sb.read("b.bin")["content_base64"], "AP8B")
        self.assertEqual(self.sb.stat("dir/notes.txt")["size"], len("héllo\nfrom the host\n".encode()))
        names = {e["path"]: e for e in self.sb.list()}
        self.assertTrue(names[os.path.join(self.ws, ".env")].get("denied"))

    def test_write_outside_refused(self):
        path = os.path.join(self.outside, "from-api.txt")
        with self.assertRaises(HutchError) as cm:
            self.sb.write(path, "x")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "denied"))
        self.assertFalse(os.path.exists(path))

    def test_explain_agrees_with_the_write(self):
        # /v1/explain's verdict is what the file door then does, judged
        # on the host.
        path = os.path.join(self.outside, "explained.txt")
        x = self.sb.explain(path, "write")
        self.assertEqual((x["allowed"], x["rule"]), (False, "outside-writable"))
        self.assertIn("--write", x["allow"]["flag"])
        with self.assertRaises(HutchError):
            self.sb.write(path, "x")
        self.assertFalse(os.path.exists(path))
        x = self.sb.explain(".env")
        self.assertEqual((x["allowed"], x["rule"]), (False, "deny-name"))
        with self.assertRaises(HutchError) as cm:
            self.sb.explain("a.txt", "exec")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "access"))

    def test_timeout_kills(self):
        # The timeout counts the sandbox's setup: one that lands before the
        # command runs kills at once (137, startup 0), which says nothing
        # of the SIGTERM a running command gets; a machine busy enough to
        # spend the whole timeout on setup is given a longer one.
        for timeout_ms in (500, 4000, 16000):
            start = time.monotonic()
            r = self.sb.exec(command="sleep 30", timeout_ms=timeout_ms)
            self.assertLess(time.monotonic() - start, timeout_ms / 1000 + 15)
            self.assertTrue(r.killed)
            self.assertEqual(r.kill_reason, "timeout")
            if r.result["startup_ns"] > 0:
                self.assertEqual(r.exit_code, 128 + 15)
                return
        self.fail("sleep never started within a %d ms timeout" % timeout_ms)

    def test_output_streams(self):
        # The command goes on only once the client has seen its first
        # line: output that came only with the end would leave it waiting
        # (30 s, then "never" and exit 9). No clock is judged.
        seen = []
        mark = os.path.join(self.ws, "seen-%d" % time.monotonic_ns())

        def record(stream, data):
            seen.append((stream, data))
            if data == b"one\n":
                open(mark, "w").close()

        r = self.sb.exec(command=HANDSHAKE.format(mark=mark), on_output=record)
        self.assertEqual((r.stdout, r.exit_code), ("one\ntwo\n", 0))
        self.assertEqual(seen[0], ("stdout", b"one\n"))

    def test_bad_request_names_field(self):
        with self.assertRaises(HutchError) as cm:
            self.sb.exec()
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "argv"))
        with self.assertRaises(HutchError) as cm:
            self.sb.exec(command="true", cwd="/etc")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "cwd"))
        self.assertEqual(self.sb.health()["status"], "ok")

    def test_grant_within_the_ceiling_only(self):
        # The server may grant writes to outside, and nothing else: a
        # domain is refused before anything runs.
        marker = os.path.join(self.ws, "granted-net")
        with self.assertRaises(HutchError) as cm:
            self.sb.exec(argv=["touch", marker], allowed_domains=["example.com"])
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.field),
                         (403, "not_permitted", "allowed_domains"))
        self.assertFalse(os.path.exists(marker))
        target = os.path.join(self.outside, "granted-write")
        r = self.sb.exec(argv=["touch", target])
        self.assertNotEqual(r.exit_code, 0)
        self.assertFalse(os.path.exists(target))
        r = self.sb.exec(argv=["touch", target], grant=["write:" + self.outside])
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertTrue(os.path.exists(target))

    def test_durable_process(self):
        arg = "%d.%d" % (8000 + os.getpid() % 1000, time.monotonic_ns() % 1000)
        p = self.sb.start_process(command="echo up; exec sleep " + arg, name="nap", restart="never")
        self.assertEqual(p["status"], "running")
        pid = p["pid"]
        cmdline = b""
        deadline = time.monotonic() + 10
        while cmdline != b"sleep\0" + arg.encode() + b"\0" and time.monotonic() < deadline:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmdline = f.read()
            time.sleep(0.01)
        self.assertEqual(cmdline, b"sleep\0" + arg.encode() + b"\0", "the host's pid is not the sleep")
        self.assertIn(p["id"], [q["id"] for q in self.sb.processes()])
        # The supervisor copies the output into the log as it comes: the
        # sleep may be running before "up" is there.
        logs = wait_for(lambda: self.sb.process_logs(p["id"])["content"], 10)
        self.assertEqual(logs, "up\n")
        with self.assertRaises(HutchError) as cm:
            self.sb.remove_process(p["id"])
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "active"))
        self.assertEqual(self.sb.stop_process(p["id"])["status"], "stopped")
        self.assertFalse(os.path.exists("/proc/%d" % pid), "the sleep runs on after stop")
        self.sb.remove_process(p["id"])
        with self.assertRaises(HutchError) as cm:
            self.sb.get_process(p["id"])
        self.assertEqual(cm.exception.status, 404)

    def test_durable_explain(self):
        # The server's own line, at the run's end, in the log it keeps on
        # the host; the record's run holds the refusal either way.
        p = self.sb.start_process(argv=["python3", "-c", "import ctypes; ctypes.CDLL(None).syscall(321, 0, 0, 0)"],
                                  restart="never", explain=True)
        logs = wait_for(lambda: "hutch: refused" in self.sb.process_logs(p["id"])["content"], 30)
        self.assertTrue(logs, self.sb.process_logs(p["id"])["content"])
        with open(p["log"]) as f:
            self.assertIn("bpf", f.read())
        # The line is written as the run ends, before its record says so.
        rec = wait_for(lambda: (lambda q: q if q["status"] == "exited" else None)(self.sb.get_process(p["id"])), 30)
        self.assertIsNotNone(rec, "the process never exited")
        self.assertIn("bpf", [d["op"] for d in rec["runs"][-1].get("denials", [])])
        # Its supervisor may still be ending: stop waits for it to be gone.
        self.sb.stop_process(p["id"])
        self.sb.remove_process(p["id"])

    def test_published_process(self):
        # A durable http.server answers a host socket on the published
        # loopback port, which closes with stop.
        token = "page-%d" % time.monotonic_ns()
        with open(os.path.join(self.ws, "page.txt"), "w") as f:
            f.write(token)
        p = self.sb.start_process(argv=["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"],
                                  name="web", publish=["0:8000"])
        try:
            pub = p["published"]
            self.assertEqual([(q["host_ip"], q["port"]) for q in pub], [("127.0.0.1", 8000)])
            port = pub[0]["host_port"]
            self.assertEqual(self.sb.get_process(p["id"])["published"], pub)
            self.assertEqual(wait_for(lambda: http_get(port, "/page.txt"), 30), token)
        finally:
            self.sb.stop_process(p["id"])
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), 5).close()

    def test_published_exec(self):
        # exec_stream says the host port first; an echo server inside
        # answers it while the command runs; the result counts it.
        echo = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 9000)); s.listen(); "
                "c, _ = s.accept(); c.sendall(c.recv(100)); c.close()")
        events = self.sb.exec_stream(argv=["python3", "-c", echo], publish=["0:9000"])
        kind, pub = next(events)
        self.assertEqual(kind, "published")
        port = pub[0]["host_port"]
        self.assertEqual(wait_for(lambda: echo_once(port, b"ping"), 30), b"ping")
        result = [ev for ev in events if ev[0] == "result"][0][1]
        self.assertEqual(result["exit_status"], 0)
        self.assertEqual(result["result"]["published"], pub)
        self.assertTrue(any(e["bytes_out"] == 4 for e in result["result"]["ingress"]), result["result"])
        for bad in (["0.0.0.0:0:80"], ["99999:80"], ["abc"]):
            with self.assertRaises(HutchError) as cm:
                self.sb.exec(command="true", publish=bad)
            self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"), bad)
            self.assertIn(bad[0], str(cm.exception))

    def test_file_type_and_mode(self):
        # The answers' "mode" is the host's st_mode, bit for bit, and
        # "type" names it; a listing shows a symlink as itself, stat
        # follows it.
        d = os.path.join(self.ws, "modes")
        os.mkdir(d)
        os.chmod(d, 0o750)
        f = os.path.join(d, "f")
        with open(f, "w") as fh:
            fh.write("x")
        os.chmod(f, 0o640)
        os.symlink("f", os.path.join(d, "link"))
        os.mkfifo(os.path.join(d, "fifo"))
        os.mkdir(os.path.join(d, "sticky"))
        os.chmod(os.path.join(d, "sticky"), 0o1777)

        info = self.sb.stat("modes")
        self.assertEqual(info["type"], "dir")
        self.assertTrue(stat.S_ISDIR(info["mode"]))
        self.assertEqual(stat.S_IMODE(info["mode"]), 0o750)
        self.assertEqual(info["mode"], os.lstat(d).st_mode)
        info = self.sb.stat("modes/f")
        self.assertEqual(info["type"], "file")
        self.assertTrue(stat.S_ISREG(info["mode"]))
        self.assertEqual(stat.S_IMODE(info["mode"]), 0o640)
        info = self.sb.stat("modes/link")
        self.assertEqual((info["type"], info["host_path"]), ("file", f))
        read = self.sb.read("modes/f")
        self.assertEqual((read["type"], read["mode"], read["content"]), ("file", os.lstat(f).st_mode, "x"))

        entries = {os.path.basename(e["host_path"]): e for e in self.sb.list("modes")}
        self.assertEqual(sorted(entries), ["f", "fifo", "link", "sticky"])
        for name, e in entries.items():
            host = os.lstat(os.path.join(d, name)).st_mode
            self.assertEqual(e["mode"], host, name)
            self.assertEqual(e["type"], host_type(host), name)
        self.assertEqual(entries["link"]["type"], "symlink")
        self.assertTrue(stat.S_ISLNK(entries["link"]["mode"]))
        self.assertTrue(stat.S_ISFIFO(entries["fifo"]["mode"]))
        self.assertEqual(stat.S_IMODE(entries["sticky"]["mode"]), 0o1777)
        self.assertTrue(entries["sticky"]["mode"] & stat.S_ISVTX)

    def test_write_perm(self):
        # perm as an int (0o600) or as the wire's octal string ("640").
        for name, perm, want in (("p600", 0o600, 0o600), ("p640", "640", 0o640)):
            path = os.path.join(self.ws, name)
            info = self.sb.write(path, "x", perm=perm)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), want)
            self.assertEqual(info["mode"], os.stat(path).st_mode)
            self.assertEqual(info["type"], "file")
        with self.assertRaises(TypeError):
            self.sb.write(os.path.join(self.ws, "p-bad"), "x", perm=True)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "p-bad")))

    def test_large_stdin(self):
        data = os.urandom(3 << 20)
        r = self.sb.exec(command="cat > big.bin", stdin=data)
        self.assertEqual(r.exit_code, 0, r.stderr)
        with open(os.path.join(self.ws, "big.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        # A command that reads little of it ends, and its result comes back
        # (the server stops reading: the rest is not sent).
        r = self.sb.exec(argv=["head", "-c", "10"], stdin=b"y" * (8 << 20))
        self.assertEqual((r.exit_code, r.stdout), (0, "y" * 10))
        r = self.sb.exec(argv=["true"], stdin=b"y" * (8 << 20))
        self.assertEqual(r.exit_code, 0)

    def test_content_bytes(self):
        data = b"\x00\xffbin"
        with open(os.path.join(self.ws, "cb.bin"), "wb") as f:
            f.write(data)
        self.assertEqual(content_bytes(self.sb.read("cb.bin")), data)
        self.sb.write(os.path.join(self.ws, "cb.txt"), "héllo")
        self.assertEqual(content_bytes(self.sb.read("cb.txt")), "héllo".encode())

    def test_stream_closed_early_stops_the_command(self):
        arg = unique_sleep()
        with contextlib.closing(self.sb.exec_stream(command="echo up; exec sleep " + arg)) as events:
            self.assertEqual(next(events), ("stdout", b"up\n"))
            pids = wait_for(lambda: host_pids(["sleep", arg]), 10)
            self.assertTrue(pids, "the sleep is not in the host's process table")
        # The connection is closed: the server stops the command (SIGTERM).
        self.assertTrue(wait_for(lambda: not host_pids(["sleep", arg]), 10),
                        "the sleep runs on after the client hung up")

    def test_policy_without_a_policy_file(self):
        # The server's flags are its policy: GET /v1/policy answers them,
        # and a reload reads them again, changing nothing.
        p = self.sb.policy()
        self.assertEqual((p["policy"]["Workspace"], p["policy"]["Network"]), (self.ws, "none"))
        self.assertFalse(p["policy"]["Env"])
        self.assertFalse(p["policy"]["Writable"])
        self.assertEqual((p["kill_after_ms"], p["grantable"]), (2000, ["write:" + self.outside]))
        self.assertEqual(self.sb.reload(), {"status": "reloaded", "workspace": self.ws})
        self.assertEqual(self.sb.policy(), p)
        target = os.path.join(self.outside, "after-reload")
        r = self.sb.exec(argv=["touch", target])
        self.assertNotEqual(r.exit_code, 0)
        self.assertFalse(os.path.exists(target), "a write outside the workspace reached the host after a reload")


class PolicyFileTest(ServeCase, unittest.TestCase):
    """A server with a --policy file, which the test rewrites and reloads."""

    sb: Sandbox
    policy_text = 'version = 1\n[sandbox]\nenv = ["HUTCH_PY_PHASE=before"]\n'

    def run_tagged(self, tag):
        """Runs a command that writes, on the host, the phase of the policy
        it ran under (ws/phase-TAG) and TAG to outside/TAG (where the policy
        may let it): its exit code and the two files (None: not there)."""
        r = self.sb.exec(command=f'echo "$HUTCH_PY_PHASE" > phase-{tag}; echo {tag} > {self.outside}/{tag}')
        return r.exit_code, read_or(os.path.join(self.ws, "phase-" + tag)), read_or(os.path.join(self.outside, tag))

    def test_policy_and_reload(self):
        p = self.sb.policy()
        self.assertEqual((p["policy"]["Workspace"], p["policy"]["Env"]), (self.ws, ["HUTCH_PY_PHASE=before"]))
        self.assertFalse(p["policy"]["Writable"])
        self.assertEqual((p["kill_after_ms"], p["grantable"]), (2000, ["write:" + self.outside]))
        code, phase, wrote = self.run_tagged("1")
        self.assertNotEqual(code, 0)
        self.assertEqual((phase, wrote), ("before\n", None))

        # Changed, the file is not in effect until a reload.
        self.write_policy('version = 1\n[sandbox]\nenv = ["HUTCH_PY_PHASE=after"]\nwritable = [%s]\n'
                          % json.dumps(self.outside))
        self.assertEqual(self.sb.policy(), p)
        self.assertEqual(self.sb.reload(), {"status": "reloaded", "workspace": self.ws})
        p = self.sb.policy()
        self.assertEqual((p["policy"]["Env"], p["policy"]["Writable"]), (["HUTCH_PY_PHASE=after"], [self.outside]))
        code, phase, wrote = self.run_tagged("2")
        self.assertEqual((code, phase, wrote), (0, "after\n", "2\n"))

        # A policy that does not build is refused, and the one in effect
        # stays: in the answer and on the host.
        self.write_policy('version = 1\n[sandbox]\nmemory = "1k"\n')
        with self.assertRaises(HutchError) as cm:
            self.sb.reload()
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        self.assertIn("Memory", cm.exception.message)
        self.assertEqual(self.sb.policy(), p)
        self.assertEqual(self.run_tagged("3"), (0, "after\n", "3\n"))

        # So is a file that does not parse: the caller's own value, a 400
        # naming what is wrong, not a fault of the server's.
        self.write_policy('version = 1\n[sandbox]\nmemroy = "1G"\n')
        with self.assertRaises(HutchError) as cm:
            self.sb.reload()
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        self.assertIn("memroy", cm.exception.message)
        self.assertEqual(self.sb.policy(), p)


def read_or(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return default


def host_type(mode):
    """FileInfo's "type" for a host st_mode."""
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char_device"),
                       (stat.S_ISBLK, "block_device")):
        if test(mode):
            return name
    return "other"


def http_get(port, path):
    """The body of GET http://127.0.0.1:port/path from the host, or None."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
            return r.read().decode()
    except OSError:
        return None


def echo_once(port, data):
    """What an echo server on the host's 127.0.0.1:port sends back, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), 10) as c:
            c.sendall(data)
            return c.recv(100) or None
    except OSError:
        return None


def wait_for(cond, secs):
    """cond()'s first true value within secs, else its last."""
    deadline = time.monotonic() + secs
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.02)


class ApprovalsTest(ServeCase, unittest.TestCase):
    """A server with a --rules file and a grants database that the test
    keeps as the user would, with hutch grants beside it."""

    rules_text = APPROVAL_RULES
    sb: Sandbox

    def test_decide_as_the_cli(self):
        scope = ["--agent", "coder", "--workspace", self.ws]
        for tool, arg, _ in APPROVAL_CALLS:
            if tool == "bash":
                self.assertEqual(self.sb.decide(tool, arg, agent="coder", workspace=self.ws)["decision"], "prompt",
                                 "%s %r before any grant" % (tool, arg))
        for tool, pattern, decision in APPROVAL_GRANTS:
            self.grants("add", "--tool", tool, "--pattern", pattern, "--decision", decision, *scope)
        # Read on every call: the grants count at once, as the CLI sees them.
        for tool, arg, want in APPROVAL_CALLS:
            v = self.sb.decide(tool, arg, agent="coder", workspace=self.ws)
            self.assertEqual(v, self.grants("decide", "--rules", self.rules_path, "--tool", tool, "--arg", arg, *scope))
            self.assertEqual(v["decision"], want, "%s %r: %r" % (tool, arg, v))
        both = self.sb.decide("bash", "npm test && ls", agent="coder", workspace=self.ws)
        self.assertEqual((len(both["grants"]), both["grant"]), (2, both["grants"][0]))
        # The grants are coder's, in this workspace.
        self.assertEqual(self.sb.decide("bash", "npm test", agent="other", workspace=self.ws)["decision"], "prompt")
        self.assertEqual(self.sb.decide("bash", "npm test", agent="coder")["decision"], "prompt")

    def test_rules_and_refusals(self):
        rules = self.sb.approval_rules()
        self.assertEqual(rules, self.grants("rules", "--rules", self.rules_path, "--json"))
        self.assertIn({"tool": "write", "decision": "prompt", "danger": "medium", "shell": False}, rules)
        with self.assertRaises(HutchError) as cm:
            self.sb.decide("", "ls")
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.field), (400, "bad_request", "tool"))


if __name__ == "__main__":
    unittest.main()
