"""Tests of hutch_client.aio's AsyncSandbox against a real `hutch serve`
($HUTCH_BIN), each verdict checked on the host as test_hutch_client's are:
the files written, the processes in the host's process table.
"""

import asyncio
import contextlib
import json
import os
import socket
import stat
import time
import unittest

from hutch_client import ExecResult, HutchError, content_bytes
from hutch_client.aio import AsyncSandbox
from serve_fixture import (APPROVAL_CALLS, APPROVAL_GRANTS, APPROVAL_RULES, HANDSHAKE, SECRET, ServeCase, host_pids,
                           server_connection_inodes, unique_sleep)


async def wait_for(cond, secs):
    """cond()'s first true value within secs, else its last."""
    deadline = time.monotonic() + secs
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            return v
        await asyncio.sleep(0.02)


class AsyncServeTest(ServeCase, unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        self.asb = AsyncSandbox(self.sock, timeout=60)

    async def asyncTearDown(self):
        await self.asb.aclose()

    async def test_connection_kept(self):
        # Seen from the host: the server's ends of the connections to its
        # socket, by inode (/proc/net/unix). A call read to its end leaves
        # its connection for the next: the same inode serves them all;
        # aclose() (leaving the async with block) ends it. The server
        # closes its end of a connection the client closed a moment later:
        # what is counted after a close is waited for.
        before = server_connection_inodes(self.sock)

        def new():
            return server_connection_inodes(self.sock) - before

        async with AsyncSandbox(self.sock, timeout=60) as asb:
            await asb.health()
            first = new()
            self.assertEqual(len(first), 1, first)
            for _ in range(10):
                self.assertEqual((await asb.exec(command="echo hi")).stdout, "hi\n")
                await asb.stat(".")
                with self.assertRaises(HutchError):
                    await asb.read("/etc/shadow")
            self.assertEqual(new(), first, "the calls did not all use the first connection")
            # A stream left early closes its connection (the kept one, which
            # it took): its command is stopped.
            arg = unique_sleep()
            events = asb.exec_stream(command="echo x; exec sleep " + arg)
            self.assertEqual(await events.__anext__(), ("stdout", b"x\n"))
            self.assertTrue(await wait_for(lambda: host_pids(["sleep", arg]), 10))
            await events.aclose()
            self.assertTrue(await wait_for(lambda: not host_pids(["sleep", arg]), 10),
                            "the sleep runs on after its stream was closed")
            self.assertTrue(await wait_for(lambda: not new(), 10), new())
            # Calls side by side each have a connection, kept afterwards.
            rs = await asyncio.gather(*(asb.exec(command="sleep 0.5; echo %d" % i) for i in range(3)))
            self.assertEqual([r.stdout for r in rs], ["0\n", "1\n", "2\n"])
            kept = new()
            self.assertEqual(len(kept), 3, kept)
            await asb.health()
            self.assertEqual(new(), kept)
        self.assertTrue(await wait_for(lambda: not new(), 10), "connections left after aclose: %s" % new())

    async def test_kept_connection_closed_by_server(self):
        # The server closes a kept connection (as its idle timeout does):
        # the next call finds it closed and uses a new one.
        async with AsyncSandbox(self.sock, timeout=60) as asb:
            await asb.health()
            kept = asb._idle[0]
            kept.sock.shutdown(socket.SHUT_RD)  # as if the server had sent its end
            self.assertEqual((await asb.exec(command="echo again")).stdout, "again\n")
            self.assertNotIn(kept, asb._idle)

    async def test_health_and_version(self):
        h = await self.asb.health()
        self.assertEqual((h["status"], h["workspace"]), ("ok", self.ws))
        self.assertEqual((await self.asb.version())["protocol"], 1)

    async def test_exec_output_and_exit_codes(self):
        r = await self.asb.exec(command="echo out; echo err >&2; exit 3")
        self.assertIsInstance(r, ExecResult)
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out\n", "err\n"))
        self.assertEqual(r.result["exit_code"], 3)
        r = await self.asb.exec(argv=["sh", "-c", 'echo "$A:$(pwd)"; cat'], cwd=None, env={"A": "b"}, stdin="in")
        self.assertEqual((r.exit_code, r.stdout), (0, "b:%s\nin" % self.ws))
        self.assertEqual((await self.asb.exec(argv=["no-such-command-here"])).exit_code, 127)
        self.assertEqual((await self.asb.exec(command="kill -9 $$")).exit_code, 137)
        r = await self.asb.exec(command="printf 'a\\377b'")
        self.assertEqual((r.stdout_bytes, r.stdout), (b"a\xffb", "a\ufffdb"))

    async def test_exec_writes_land_in_workspace_only(self):
        inside = os.path.join(self.ws, "aio-exec.txt")
        outside = os.path.join(self.outside, "aio-exec.txt")
        r = await self.asb.exec(command=f"echo inside > {inside}; echo outside > {outside}")
        self.assertNotEqual(r.exit_code, 0)
        with open(inside) as f:
            self.assertEqual(f.read(), "inside\n")
        self.assertFalse(os.path.exists(outside), "a write outside the workspace reached the host")

    async def test_explain(self):
        outside = os.path.join(self.outside, "aio-explained.txt")
        r = await self.asb.exec(argv=["touch", outside], explain=True)
        self.assertEqual([(d["op"], d["object"], d["rule"]) for d in r.result["denials"]],
                         [("write", outside, "outside-writable")])
        self.assertIn(f"\nhutch: refused write {outside}: ", r.stderr)
        self.assertFalse(os.path.exists(outside), "a write outside the workspace reached the host")

    async def test_stdin_bytes_to_a_host_file(self):
        data = os.urandom(2 << 20) + b"\xff\x00end"
        r = await self.asb.exec(command="cat > aio-stdin.bin", stdin=data)
        self.assertEqual(r.exit_code, 0, r.stderr)
        with open(os.path.join(self.ws, "aio-stdin.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        # A command that reads little of its stdin ends with its result.
        r = await self.asb.exec(argv=["head", "-c", "10"], stdin=b"y" * (8 << 20))
        self.assertEqual((r.exit_code, r.stdout), (0, "y" * 10))
        r = await self.asb.exec(argv=["true"], stdin=b"y" * (8 << 20))
        self.assertEqual(r.exit_code, 0)

    async def test_output_streams_to_callbacks(self):
        # A plain function and a coroutine function both see each chunk as
        # it comes: the command goes on only once the first line was seen
        # (see HANDSHAKE). No clock is judged.
        for make in ("plain", "coroutine"):
            seen = []
            mark = os.path.join(self.ws, "seen-%s-%d" % (make, time.monotonic_ns()))

            def record(stream, data):
                seen.append((stream, data))
                if data == b"one\n":
                    open(mark, "w").close()

            async def record_async(stream, data):
                await asyncio.sleep(0)
                record(stream, data)

            r = await self.asb.exec(command="echo e >&2; " + HANDSHAKE.format(mark=mark),
                                    on_output=record if make == "plain" else record_async)
            self.assertEqual((r.stdout, r.stderr, r.exit_code), ("one\ntwo\n", "e\n", 0), make)
            # stdout and stderr are pipes of their own: either may come first.
            stdout = [x for x in seen if x[0] == "stdout"]
            self.assertEqual(stdout[0][1], b"one\n", make)
            self.assertIn(("stderr", b"e\n"), seen, make)

    async def test_exec_stream(self):
        events = []
        async for ev in self.asb.exec_stream(command="echo a; echo b >&2; exit 4"):
            events.append(ev)
        self.assertEqual(events[-1][0], "result")
        result = events[-1][1]
        self.assertEqual((result["exit_status"], result["result"]["exit_code"]), (4, 4))
        out = b"".join(d for t, d in events[:-1] if t == "stdout")
        err = b"".join(d for t, d in events[:-1] if t == "stderr")
        self.assertEqual((out, err), (b"a\n", b"b\n"))

    async def test_calls_run_side_by_side(self):
        # Each command waits for the other's file: they end only if both
        # run at once, each on its own connection.
        a, b = os.path.join(self.ws, "side-a"), os.path.join(self.ws, "side-b")
        wait = "touch {mine}; i=0; while [ ! -e {other} ]; do i=$((i+1)); [ $i -gt 600 ] && exit 9; sleep 0.05; done"
        ra, rb = await asyncio.gather(self.asb.exec(command=wait.format(mine=a, other=b), timeout_ms=60000),
                                      self.asb.exec(command=wait.format(mine=b, other=a), timeout_ms=60000))
        self.assertEqual((ra.exit_code, rb.exit_code), (0, 0))
        self.assertTrue(os.path.exists(a) and os.path.exists(b))

    async def test_cancelled_call_stops_the_command(self):
        arg = unique_sleep()
        task = asyncio.ensure_future(self.asb.exec(command="exec sleep " + arg))
        pids = await wait_for(lambda: host_pids(["sleep", arg]), 10)
        self.assertTrue(pids, "the sleep is not in the host's process table")
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertTrue(await wait_for(lambda: not host_pids(["sleep", arg]), 10),
                        "the sleep runs on after its call was cancelled")
        # asyncio.wait_for's timeout is a cancel too.
        arg = unique_sleep()
        with self.assertRaises(asyncio.TimeoutError):
            await asyncio.wait_for(self.asb.exec(command="exec sleep " + arg), 1)
        self.assertTrue(await wait_for(lambda: not host_pids(["sleep", arg]), 10),
                        "the sleep runs on after wait_for's timeout")

    async def test_stream_closed_early_stops_the_command(self):
        arg = unique_sleep()
        async with contextlib.AsyncExitStack() as stack:
            events = self.asb.exec_stream(command="echo up; exec sleep " + arg)
            stack.push_async_callback(events.aclose)
            self.assertEqual(await events.__anext__(), ("stdout", b"up\n"))
            self.assertTrue(await wait_for(lambda: host_pids(["sleep", arg]), 10))
        self.assertTrue(await wait_for(lambda: not host_pids(["sleep", arg]), 10),
                        "the sleep runs on after the client hung up")

    async def test_timeout_kills(self):
        # As test_hutch_client's: a timeout spent on setup alone is given
        # a longer one.
        for timeout_ms in (500, 4000, 16000):
            start = time.monotonic()
            r = await self.asb.exec(command="sleep 30", timeout_ms=timeout_ms)
            self.assertLess(time.monotonic() - start, timeout_ms / 1000 + 15)
            self.assertEqual((r.killed, r.kill_reason), (True, "timeout"))
            if r.result["startup_ns"] > 0:
                self.assertEqual(r.exit_code, 128 + 15)
                return
        self.fail("sleep never started within a %d ms timeout" % timeout_ms)

    async def test_files(self):
        path = os.path.join(self.ws, "aio", "notes.txt")
        info = await self.asb.write(path, "héllo\n")
        self.assertEqual((info["host_path"], info["type"]), (path, "file"))
        with open(path, encoding="utf-8") as f:
            self.assertEqual(f.read(), "héllo\n")
        with open(path, "a") as f:
            f.write("from the host\n")
        read = await self.asb.read("aio/notes.txt")
        self.assertEqual(read["content"], "héllo\nfrom the host\n")
        await self.asb.write(os.path.join(self.ws, "aio", "b.bin"), b"\x00\xff\x01", perm=0o600)
        host = os.path.join(self.ws, "aio", "b.bin")
        with open(host, "rb") as f:
            self.assertEqual(f.read(), b"\x00\xff\x01")
        self.assertEqual(stat.S_IMODE(os.stat(host).st_mode), 0o600)
        self.assertEqual(content_bytes(await self.asb.read("aio/b.bin")), b"\x00\xff\x01")
        await self.asb.write(path, "more\n", append=True)
        with open(path, encoding="utf-8") as f:
            self.assertEqual(f.read(), "héllo\nfrom the host\nmore\n")

    async def test_stat_mode_is_st_mode(self):
        d = os.path.join(self.ws, "aio-modes")
        os.mkdir(d)
        os.chmod(d, 0o705)
        os.symlink(".", os.path.join(d, "self"))
        info = await self.asb.stat("aio-modes")
        self.assertEqual(info["type"], "dir")
        self.assertTrue(stat.S_ISDIR(info["mode"]))
        self.assertEqual(stat.S_IMODE(info["mode"]), 0o705)
        self.assertEqual(info["mode"], os.lstat(d).st_mode)
        (entry,) = await self.asb.list("aio-modes")
        self.assertEqual((entry["type"], entry["mode"]), ("symlink", os.lstat(os.path.join(d, "self")).st_mode))
        self.assertTrue(stat.S_ISLNK(entry["mode"]))
        names = {e["path"]: e for e in await self.asb.list()}
        self.assertTrue(names[os.path.join(self.ws, ".env")].get("denied"))

    async def test_refusals(self):
        with self.assertRaises(HutchError) as cm:
            await self.asb.read(".env")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "denied"))
        self.assertNotIn(SECRET, str(cm.exception))
        path = os.path.join(self.outside, "aio-api.txt")
        with self.assertRaises(HutchError) as cm:
            await self.asb.write(path, "x")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "denied"))
        self.assertFalse(os.path.exists(path))
        with self.assertRaises(HutchError) as cm:
            await self.asb.exec()
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "argv"))
        with self.assertRaises(HutchError) as cm:
            await self.asb.exec(command="true", cwd="/etc")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "cwd"))
        with self.assertRaises(TypeError):
            await self.asb.exec(argv="ls")
        # Beyond the ceiling: refused before anything runs; within it: granted.
        marker = os.path.join(self.ws, "aio-granted-net")
        with self.assertRaises(HutchError) as cm:
            await self.asb.exec(argv=["touch", marker], allowed_domains=["example.com"])
        self.assertEqual((cm.exception.code, cm.exception.field), ("not_permitted", "allowed_domains"))
        self.assertFalse(os.path.exists(marker))
        target = os.path.join(self.outside, "aio-granted-write")
        r = await self.asb.exec(argv=["touch", target], grant=["write:" + self.outside])
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertTrue(os.path.exists(target))

    async def test_no_server(self):
        with self.assertRaises(OSError):
            await AsyncSandbox(os.path.join(self.sockdir, "none.sock")).health()

    async def test_durable_process(self):
        arg = unique_sleep()
        p = await self.asb.start_process(command="echo up; exec sleep " + arg, name="aio-nap", restart="never")
        self.assertEqual(p["status"], "running")
        self.assertTrue(await wait_for(lambda: p["pid"] in host_pids(["sleep", arg]), 10),
                        "the host's pid is not the sleep")
        self.assertIn(p["id"], [q["id"] for q in await self.asb.processes()])
        self.assertEqual((await self.asb.get_process(p["id"]))["name"], "aio-nap")
        # The supervisor copies the output into the log as it comes: the
        # sleep may be running before "up" is there.
        deadline = time.monotonic() + 10
        while True:
            logs = await self.asb.process_logs(p["id"])
            if logs["content"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        self.assertEqual((logs["content"], logs["length"]), ("up\n", 3))
        with self.assertRaises(HutchError) as cm:
            await self.asb.remove_process(p["id"])
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "active"))
        self.assertEqual((await self.asb.stop_process(p["id"]))["status"], "stopped")
        self.assertFalse(os.path.exists("/proc/%d" % p["pid"]), "the sleep runs on after stop")
        self.assertEqual((await self.asb.remove_process(p["id"]))["removed"], p["id"])
        with self.assertRaises(HutchError) as cm:
            await self.asb.get_process(p["id"])
        self.assertEqual(cm.exception.status, 404)

    async def test_reload(self):
        self.assertEqual((await self.asb.reload())["status"], "reloaded")

    async def test_policy(self):
        # No --policy file: the flags' policy, which a reload leaves as it is.
        p = await self.asb.policy()
        self.assertEqual((p["policy"]["Workspace"], p["kill_after_ms"], p["grantable"]),
                         (self.ws, 2000, ["write:" + self.outside]))
        self.assertFalse(p["policy"]["Writable"])
        self.assertEqual(await self.asb.reload(), {"status": "reloaded", "workspace": self.ws})
        self.assertEqual(await self.asb.policy(), p)


class AsyncPolicyFileTest(ServeCase, unittest.IsolatedAsyncioTestCase):
    """A server with a --policy file, rewritten and reloaded through
    AsyncSandbox."""

    policy_text = 'version = 1\n[sandbox]\nenv = ["HUTCH_PY_PHASE=before"]\n'

    def setUp(self):
        self.asb = AsyncSandbox(self.sock, timeout=60)

    async def asyncTearDown(self):
        await self.asb.aclose()

    async def test_policy_and_reload(self):
        target = os.path.join(self.outside, "aio-reload")
        p = await self.asb.policy()
        self.assertEqual((p["policy"]["Workspace"], p["policy"]["Env"]), (self.ws, ["HUTCH_PY_PHASE=before"]))
        r = await self.asb.exec(command=f"touch {target}")
        self.assertNotEqual(r.exit_code, 0)
        self.assertFalse(os.path.exists(target))

        self.write_policy('version = 1\n[sandbox]\nenv = ["HUTCH_PY_PHASE=after"]\nwritable = [%s]\n'
                          % json.dumps(self.outside))
        self.assertEqual(await self.asb.reload(), {"status": "reloaded", "workspace": self.ws})
        p = await self.asb.policy()
        self.assertEqual((p["policy"]["Env"], p["policy"]["Writable"]), (["HUTCH_PY_PHASE=after"], [self.outside]))
        r = await self.asb.exec(command=f'echo "$HUTCH_PY_PHASE" > {target}')
        self.assertEqual(r.exit_code, 0, r.stderr)
        with open(target) as f:
            self.assertEqual(f.read(), "after\n")

        self.write_policy('version = 1\n[sandbox]\nmemory = "1k"\n')
        with self.assertRaises(HutchError) as cm:
            await self.asb.reload()
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "bad_request"))
        self.assertEqual(await self.asb.policy(), p)


class AsyncApprovalsTest(ServeCase, unittest.IsolatedAsyncioTestCase):
    """As test_hutch_client's ApprovalsTest, through AsyncSandbox."""

    rules_text = APPROVAL_RULES

    def setUp(self):
        self.asb = AsyncSandbox(self.sock, timeout=60)

    async def asyncTearDown(self):
        await self.asb.aclose()

    async def test_decide_as_the_cli(self):
        scope = ["--agent", "coder", "--workspace", self.ws]
        for tool, pattern, decision in APPROVAL_GRANTS:
            await asyncio.to_thread(self.grants, "add", "--tool", tool, "--pattern", pattern, "--decision", decision,
                                    *scope)
        verdicts = await asyncio.gather(*(self.asb.decide(tool, arg, agent="coder", workspace=self.ws)
                                          for tool, arg, _ in APPROVAL_CALLS))
        for (tool, arg, want), v in zip(APPROVAL_CALLS, verdicts):
            cli = await asyncio.to_thread(self.grants, "decide", "--rules", self.rules_path, "--tool", tool,
                                          "--arg", arg, *scope)
            self.assertEqual(v, cli)
            self.assertEqual(v["decision"], want, "%s %r: %r" % (tool, arg, v))

    async def test_rules_and_refusals(self):
        cli = await asyncio.to_thread(self.grants, "rules", "--rules", self.rules_path, "--json")
        self.assertEqual(await self.asb.approval_rules(), cli)
        with self.assertRaises(HutchError) as cm:
            await self.asb.decide("", "ls")
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "tool"))


if __name__ == "__main__":
    unittest.main()
