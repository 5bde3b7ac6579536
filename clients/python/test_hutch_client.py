"""Tests of hutch_client against a real `hutch serve` ($HUTCH_BIN), each
verdict checked on the host: the files the sandbox wrote or did not, the
secrets that did not come back.

    HUTCH_BIN=/path/to/hutch python3 -m unittest -v test_hutch_client

Workspaces are made in $HUTCH_TEST_SCRATCH (default /var/tmp), not /tmp: a
command's /tmp is its own, so a host path there would prove nothing.
"""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

from hutch_client import HutchError, Sandbox

SECRET = "HUTCH-PY-CLIENT-SECRET-5c1e"


class ServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        hutch = os.environ.get("HUTCH_BIN")
        if not hutch:
            raise unittest.SkipTest("HUTCH_BIN names no hutch binary")
        scratch = os.environ.get("HUTCH_TEST_SCRATCH", "/var/tmp")
        cls.base = tempfile.mkdtemp(prefix="hutch-py-", dir=scratch)
        os.chmod(cls.base, 0o755)
        cls.ws = os.path.join(cls.base, "ws")
        cls.outside = os.path.join(cls.base, "outside")
        os.mkdir(cls.ws)
        os.mkdir(cls.outside)
        with open(os.path.join(cls.ws, ".env"), "w") as f:
            f.write("API_KEY=" + SECRET + "\n")
        cls.sockdir = tempfile.mkdtemp(prefix="hutch-py-sock-")  # 0700
        cls.sock = os.path.join(cls.sockdir, "hutch.sock")
        cls.log = open(os.path.join(cls.base, "serve.log"), "w+")
        cls.proc = subprocess.Popen(
            [hutch, "serve", "--socket", cls.sock, "--workspace", cls.ws, "--kill-after", "2s",
             "--data-dir", os.path.join(cls.base, "data"), "--grantable", "write:" + cls.outside],
            stdout=cls.log, stderr=subprocess.STDOUT)
        cls.sb = Sandbox(cls.sock, timeout=60)
        deadline = time.monotonic() + 30
        while True:
            try:
                cls.sb.health()
                break
            except OSError:
                if cls.proc.poll() is not None or time.monotonic() > deadline:
                    cls.tearDownClass()
                    raise RuntimeError("hutch serve did not come up:\n" + cls.serve_log())
                time.sleep(0.05)

    @classmethod
    def serve_log(cls):
        cls.log.seek(0)
        return cls.log.read()

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.terminate()
            try:
                cls.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.base, ignore_errors=True)
        shutil.rmtree(cls.sockdir, ignore_errors=True)

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

    def test_timeout_kills(self):
        start = time.monotonic()
        r = self.sb.exec(command="sleep 30", timeout_ms=500)
        self.assertLess(time.monotonic() - start, 15)
        self.assertTrue(r.killed)
        self.assertEqual(r.kill_reason, "timeout")
        self.assertEqual(r.exit_code, 128 + 15)

    def test_output_streams(self):
        seen = []
        start = time.monotonic()
        r = self.sb.exec(command="echo one; sleep 1; echo two",
                         on_output=lambda s, d: seen.append((s, d, time.monotonic() - start)))
        end = time.monotonic() - start
        self.assertEqual(r.stdout, "one\ntwo\n")
        self.assertEqual(seen[0][:2], ("stdout", b"one\n"))
        self.assertLess(seen[0][2], end - 0.5, "the first chunk came only with the end")

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
        self.assertEqual(self.sb.process_logs(p["id"])["content"], "up\n")
        with self.assertRaises(HutchError) as cm:
            self.sb.remove_process(p["id"])
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "active"))
        self.assertEqual(self.sb.stop_process(p["id"])["status"], "stopped")
        self.assertFalse(os.path.exists("/proc/%d" % pid), "the sleep runs on after stop")
        self.sb.remove_process(p["id"])
        with self.assertRaises(HutchError) as cm:
            self.sb.get_process(p["id"])
        self.assertEqual(cm.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
