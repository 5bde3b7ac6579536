"""A real `hutch serve` ($HUTCH_BIN) for a test class: a workspace holding
a planted secret (.env), a directory outside it the server may grant
writes to (--grantable write:OUTSIDE), a --data-dir for durable
processes, a grants database (--grants-db) for the approvals routes, which
grants() keeps as the user would, and a --policy file and a --rules file
when the class gives them (policy_text, rules_text), all
in a directory of $HUTCH_TEST_SCRATCH (default /var/tmp), not /tmp: a
command's /tmp is its own, so a host path there would prove nothing.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
from typing import Optional

from hutch_client import Sandbox

SECRET = "HUTCH-PY-CLIENT-SECRET-5c1e"


class ServeCase:
    """setUpClass starts the server; tearDownClass stops its durable
    processes and the server, and removes what it made."""

    base: str
    ws: str
    outside: str
    sockdir: str
    sock: str
    sb: Sandbox
    #: The --policy file's text the server starts with; None: no --policy.
    policy_text: Optional[str] = None
    #: That file (write_policy replaces it).
    policy_path: str
    #: The --rules file's text the server starts with; None: no --rules.
    rules_text: Optional[str] = None
    rules_path: str
    grants_db: str

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
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
        args = [hutch, "serve", "--socket", cls.sock, "--workspace", cls.ws, "--kill-after", "2s",
                "--data-dir", os.path.join(cls.base, "data"), "--grantable", "write:" + cls.outside]
        cls.policy_path = os.path.join(cls.base, "policy.toml")
        if cls.policy_text is not None:
            cls.write_policy(cls.policy_text)
            args += ["--policy", cls.policy_path]
        # Apart from the workspace: the server refuses a database in a
        # directory that holds a tree its commands write.
        cls.grants_db = os.path.join(cls.base, "grants", "grants.db")
        args += ["--grants-db", cls.grants_db]
        cls.rules_path = os.path.join(cls.base, "rules.toml")
        if cls.rules_text is not None:
            with open(cls.rules_path, "w") as f:
                f.write(cls.rules_text)
            args += ["--rules", cls.rules_path]
        cls.proc = subprocess.Popen(args, stdout=cls.log, stderr=subprocess.STDOUT)
        cls.sb = Sandbox(cls.sock, timeout=60)
        deadline = time.monotonic() + 30
        while True:
            try:
                cls.sb.health()
                break
            except OSError:
                if cls.proc.poll() is not None or time.monotonic() > deadline:
                    log = cls.serve_log()
                    cls.tearDownClass()
                    raise RuntimeError("hutch serve did not come up:\n" + log)
                time.sleep(0.05)

    @classmethod
    def write_policy(cls, text):
        """Replaces the policy file as an editor saves one: a new file
        renamed over the old."""
        with open(cls.policy_path + ".tmp", "w") as f:
            f.write(text)
        os.rename(cls.policy_path + ".tmp", cls.policy_path)

    @classmethod
    def grants(cls, *args):
        """Runs `hutch grants --db GRANTS_DB ARGS...` (add, decide, rules
        --json...) as the user would, beside the server, and returns what
        it printed, as JSON."""
        out = subprocess.run([os.environ["HUTCH_BIN"], "grants", "--db", cls.grants_db] + list(args),
                             check=True, stdout=subprocess.PIPE).stdout
        return json.loads(out)

    @classmethod
    def serve_log(cls):
        cls.log.seek(0)
        return cls.log.read()

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            try:
                # Durable processes outlive the server: none of a failed
                # test's may.
                cls.sb.stop_all_processes()
            except Exception:
                pass
            cls.sb.close()
            cls.proc.terminate()
            try:
                cls.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.base, ignore_errors=True)
        shutil.rmtree(cls.sockdir, ignore_errors=True)
        super().tearDownClass()


def server_connection_inodes(sock_path):
    """The inodes of the server's ends of the connections to its socket at
    sock_path, as the host lists them (/proc/net/unix: the server's end of
    each is named by the path, connected, state 03; its listener is
    unconnected, 01). A connection kept for the next call is the same
    inode; one made anew is another."""
    inodes = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == sock_path and fields[5] == "03":
                inodes.add(int(fields[6]))
    return inodes


def host_pids(cmdline):
    """The host's processes whose command line is cmdline (a list)."""
    want = ("\0".join(cmdline) + "\0").encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if f.read() == want:
                    pids.append(int(name))
        except OSError:
            pass
    return pids


def unique_sleep():
    """A sleep's argument no other process on the host has: the sleep is
    then found in the host's process table by its command line."""
    return "%d.%d" % (8000 + os.getpid() % 1000, time.monotonic_ns() % 100000)


#: Tool calls of agent "coder" in the workspace, with the decision each
#: gets once APPROVAL_GRANTS are remembered, under APPROVAL_RULES.
APPROVAL_RULES = '[tools.write]\ndecision = "prompt"\n'
APPROVAL_GRANTS = [("bash", "npm test*", "allow"), ("bash", "ls", "allow"), ("bash", "sudo *", "deny"),
                   ("write", "src/*", "allow"), ("write", ".env", "deny")]
APPROVAL_CALLS = [("bash", "npm test && ls", "allow"), ("bash", "npm test; rm -rf ~", "prompt"),
                  ("bash", "ls; sudo rm -rf /", "deny"), ("bash", "echo $(sudo id)", "deny"),
                  ("write", "src/a.py", "allow"), ("write", ".env", "deny"), ("write", "README", "prompt"),
                  ("read_file", "/etc/passwd", "allow")]


#: A command that prints "one", waits for the file {mark} (made by the
#: client when it sees "one"), then prints "two"; "never" and exit 9 if the
#: file does not come in 30 s.
HANDSHAKE = ("echo one; i=0; while [ ! -e {mark} ]; do i=$((i+1)); "
             "[ $i -gt 600 ] && {{ echo never; exit 9; }}; sleep 0.05; done; echo two")
