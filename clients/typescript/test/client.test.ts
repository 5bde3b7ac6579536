// Tests of the client against a real `hutch serve` ($HUTCH_BIN), each
// verdict checked on the host: the files the sandbox wrote or did not, the
// processes left in the host's process table, the bytes as written.
//
//     npm run build && HUTCH_BIN=/path/to/hutch node --test dist/test/client.test.js
//
// Workspaces are made in $HUTCH_TEST_SCRATCH (default /var/tmp), not /tmp:
// a command's /tmp is its own, so a host path there would prove nothing.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { Buffer } from "node:buffer";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import {
  HutchError,
  HutchOptionError,
  PROTOCOL_VERSION,
  Sandbox,
  type ExecEvent,
  type FileType,
  type ProcessRecord,
  type ServerPolicy,
  type Verdict,
} from "../src/client.js";

const SECRET = "HUTCH-TS-CLIENT-SECRET-7d2a";

// ---------------------------------------------------------------------------
// Helpers

function hutchBin(): string {
  const bin = process.env["HUTCH_BIN"];
  if (!bin) {
    throw new Error(
      "HUTCH_BIN names no hutch binary: these tests start a real `hutch serve`. " +
        "Build one (cd to the checkout; go build -o /tmp/hutch ./cmd/hutch) and run with HUTCH_BIN=/tmp/hutch",
    );
  }
  if (!fs.existsSync(bin)) {
    throw new Error(`HUTCH_BIN=${bin}: no such file`);
  }
  return bin;
}

/** A hutch serve of its own: a socket in a fresh 0700 directory, a
 * workspace and an outside directory in a fresh scratch directory. */
class Server {
  readonly base: string;
  readonly ws: string;
  readonly outside: string;
  readonly sockdir: string;
  readonly sock: string;
  readonly logPath: string;
  readonly sb: Sandbox;
  private proc: ChildProcess | undefined;
  private exited: Promise<void> | undefined;

  constructor(prefix: string) {
    hutchBin(); // before anything is made
    const scratch = process.env["HUTCH_TEST_SCRATCH"] || "/var/tmp";
    this.base = fs.mkdtempSync(path.join(scratch, `hutch-ts-${prefix}-`));
    fs.chmodSync(this.base, 0o755);
    this.ws = path.join(this.base, "ws");
    this.outside = path.join(this.base, "outside");
    fs.mkdirSync(this.ws);
    fs.mkdirSync(this.outside);
    this.sockdir = fs.mkdtempSync(path.join(os.tmpdir(), "hutch-ts-sock-")); // 0700
    assert.equal(fs.statSync(this.sockdir).mode & 0o777, 0o700);
    this.sock = path.join(this.sockdir, "hutch.sock");
    this.logPath = path.join(this.base, "serve.log");
    this.sb = new Sandbox({ socketPath: this.sock, idleTimeoutMs: 60_000 });
  }

  async start(args: string[]): Promise<void> {
    const log = fs.openSync(this.logPath, "w");
    const proc = spawn(hutchBin(), ["serve", "--socket", this.sock, "--workspace", this.ws, "--kill-after", "2s", ...args], {
      stdio: ["ignore", log, log],
      // The durable processes' records, outside every writable tree.
      env: { ...process.env, HUTCH_DATA_DIR: path.join(this.base, "data") },
    });
    fs.closeSync(log);
    this.proc = proc;
    let gone = false;
    this.exited = new Promise((resolve) => proc.once("exit", () => ((gone = true), resolve())));
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await this.sb.health();
        return;
      } catch (e) {
        if (gone || Date.now() > deadline) {
          await this.stop();
          throw new Error(`hutch serve ${args.join(" ")} did not come up (${String(e)}):\n${this.log()}`);
        }
        await sleep(50);
      }
    }
  }

  log(): string {
    try {
      return fs.readFileSync(this.logPath, "utf8");
    } catch {
      return "";
    }
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      await this.exited;
      clearTimeout(t);
    }
    fs.rmSync(this.base, { recursive: true, force: true });
    fs.rmSync(this.sockdir, { recursive: true, force: true });
  }
}

/** The host's processes running `sleep ARG` (the sandbox's pid namespace
 * is inside the host's: they are all in the host's /proc). */
function hostSleeps(arg: string): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) {
      continue;
    }
    let argv: string[];
    try {
      argv = fs.readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0");
    } catch {
      continue; // gone meanwhile
    }
    if (argv.length >= 2 && path.basename(argv[0] ?? "") === "sleep" && argv[1] === arg) {
      // A zombie is gone for every purpose but its parent's wait.
      const stat = readOr(`/proc/${name}/stat`);
      if (!/^\d+ \(.*\) Z /.test(stat)) {
        pids.push(Number(name));
      }
    }
  }
  return pids;
}

function readOr(p: string, or = ""): string {
  try {
    return fs.readFileSync(p, "utf8");
  } catch {
    return or;
  }
}

let uniq = 0;
/** A sleep duration no other process has: the test finds its sleep by it. */
function uniqueSleep(): string {
  uniq++;
  return `${600 + (process.pid % 300)}.${String(Date.now() % 1_000_000).padStart(6, "0")}${uniq}`;
}

async function waitFor<T>(what: string, f: () => T | Promise<T>, ms = 10_000): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) {
      return v as Exclude<T, undefined | null | false>;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    }
    await sleep(50);
  }
}

/** The body of GET http://127.0.0.1:port/path from the host, or undefined. */
function hostGet(port: number, p: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: p, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(res.statusCode === 200 ? Buffer.concat(chunks).toString("utf8") : undefined));
      res.on("error", () => resolve(undefined));
    });
    req.on("error", () => resolve(undefined));
    req.on("timeout", () => req.destroy());
  });
}

/** What an echo server on the host's 127.0.0.1:port sends back, or undefined. */
function hostEcho(port: number, data: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const c = net.connect({ host: "127.0.0.1", port }, () => c.write(data));
    const chunks: Buffer[] = [];
    c.setTimeout(10_000, () => c.destroy());
    c.on("data", (b: Buffer) => {
      chunks.push(b);
      c.end();
    });
    c.on("close", () => resolve(chunks.length > 0 ? Buffer.concat(chunks).toString("utf8") : undefined));
    c.on("error", () => undefined);
  });
}

/** Asserts that p rejects with a HutchError of this status, code and field. */
async function rejectsHutch(p: Promise<unknown>, want: { status: number; code?: string; field?: string; wireField?: string }): Promise<HutchError> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof HutchError, `want a HutchError ${JSON.stringify(want)}, got ${err === undefined ? "success" : String(err)}`);
  assert.equal(err.status, want.status, String(err));
  if (want.code !== undefined) assert.equal(err.code, want.code, String(err));
  if (want.field !== undefined) assert.equal(err.field, want.field, String(err));
  if (want.wireField !== undefined) assert.equal(err.wireField, want.wireField, String(err));
  return err;
}

function bytes(...b: number[]): Uint8Array {
  return new Uint8Array(b);
}

/** The compiler's half of "a misspelled option is never dropped": each
 * line must not compile (tsc fails on an unused @ts-expect-error). Never
 * called. */
export function typeChecks(sb: Sandbox): void {
  // @ts-expect-error: timeoutMS is no option
  void sb.exec({ command: "true", timeoutMS: 5 });
  // @ts-expect-error: the wire's name is not the client's
  void sb.exec({ command: "true", timeout_ms: 5 });
  // @ts-expect-error: argv and command both
  void sb.exec({ command: "true", argv: ["true"] });
  // @ts-expect-error: neither
  void sb.exec({ cwd: "." });
  // @ts-expect-error: apend is no option
  void sb.write({ path: "/x", content: "x", apend: true });
  // @ts-expect-error: tail_bytes is no option
  void sb.processes.logs({ id: "x", tail_bytes: 4 });
  // @ts-expect-error: content is text or bytes
  void sb.write({ path: "/x", content: 5 });
  // @ts-expect-error: stdin is text or bytes
  void sb.exec({ command: "true", stdin: 5 });
  // @ts-expect-error: a file's type is one of the words the server says
  void ((t: FileType) => t)("directory");
}

// ---------------------------------------------------------------------------

describe("hutch serve through the TypeScript client", () => {
  let srv: Server;
  let sb: Sandbox;
  let ws: string;
  let outside: string;

  before(async () => {
    srv = new Server("main");
    ws = srv.ws;
    outside = srv.outside;
    fs.writeFileSync(path.join(ws, ".env"), `API_KEY=${SECRET}\n`);
    await srv.start([]);
    sb = srv.sb;
  });

  after(async () => {
    await srv?.stop();
  });

  it("answers health and version", async () => {
    const h = await sb.health();
    assert.equal(h.status, "ok");
    assert.equal(h.workspace, ws);
    assert.equal(typeof h.prewarmed, "number");
    const v = await sb.version();
    assert.equal(v.protocol, PROTOCOL_VERSION);
    assert.equal(typeof v.hutchVersion, "string");
  });

  it("runs commands: output, exit statuses, argv, env, stdin, cwd", async () => {
    let r = await sb.exec({ command: "echo out; echo err >&2; exit 3" });
    assert.deepEqual([r.exitCode, r.stdout, r.stderr], [3, "out\n", "err\n"]);
    assert.equal(r.result.exitCode, 3);
    assert.equal(r.killed, false);
    assert.equal(r.killReason, "");
    fs.mkdirSync(path.join(ws, "sub"), { recursive: true });
    r = await sb.exec({ argv: ["sh", "-c", 'echo "$A:$(pwd)"; cat'], cwd: "sub", env: { A: "b", lower_case: "kept" }, stdin: "in" });
    assert.deepEqual([r.exitCode, r.stdout], [0, `b:${ws}/sub\nin`]);
    r = await sb.exec({ command: 'printf %s "$lower_case"', env: { lower_case: "kept" } });
    assert.equal(r.stdout, "kept");
    r = await sb.exec({ argv: ["no-such-command-here"] });
    assert.equal(r.exitCode, 127);
    assert.equal((await sb.exec({ command: "kill -9 $$" })).exitCode, 137);
  });

  it("lands a command's writes in the workspace only", async () => {
    const inside = path.join(ws, "from-exec.txt");
    const out = path.join(outside, "from-exec.txt");
    const r = await sb.exec({ command: `echo inside > ${inside}; echo outside > ${out}` });
    assert.notEqual(r.exitCode, 0, "the write outside the workspace should fail");
    assert.equal(fs.readFileSync(inside, "utf8"), "inside\n");
    assert.equal(fs.existsSync(out), false, "a write outside the workspace reached the host");
  });

  it("explains a refusal on stderr when asked, and in the result's denials always", async () => {
    const out = path.join(outside, "explained.txt");
    for (const explain of [false, true]) {
      const r = await sb.exec({ argv: ["touch", out], explain });
      assert.deepEqual(
        (r.result.denials ?? []).map((d) => [d.source, d.op, d.object, d.rule]),
        [["file", "write", out, "outside-writable"]],
      );
      const touched = `touch: cannot touch '${out}': Read-only file system\n`;
      assert.ok(r.stderr.startsWith(touched), r.stderr);
      assert.equal(r.stderr.slice(touched.length).startsWith(`hutch: refused write ${out}: `), explain, r.stderr);
      assert.equal(fs.existsSync(out), false, "a write outside the workspace reached the host");
    }
  });

  it("does not hand back what is denied", async () => {
    const r = await sb.exec({ command: `cat .env; cat /etc/shadow; cat ${ws}/.env` });
    assert.ok(!(r.stdout + r.stderr).includes(SECRET), "the secret came back");
    const e = await rejectsHutch(sb.read({ path: ".env" }), { status: 403, code: "denied" });
    assert.ok(!String(e).includes(SECRET));
    await rejectsHutch(sb.read({ path: "/etc/shadow" }), { status: 403, code: "denied" });
  });

  it("round-trips files, text and bytes, checked on the host", async () => {
    const p = path.join(ws, "dir", "notes.txt");
    const info = await sb.write({ path: p, content: "héllo\n" });
    assert.equal(info.hostPath, p);
    assert.equal(info.writable, true);
    assert.equal(fs.readFileSync(p, "utf8"), "héllo\n");
    fs.appendFileSync(p, "from the host\n");
    const rd = await sb.read({ path: "dir/notes.txt" });
    assert.equal(rd.content, "héllo\nfrom the host\n");
    assert.equal(rd.kind, "text");
    assert.deepEqual(Buffer.from(rd.bytes), Buffer.from("héllo\nfrom the host\n"));
    assert.equal(rd.length, Buffer.byteLength("héllo\nfrom the host\n"));

    await sb.write({ path: p, content: "appended\n", append: true });
    assert.equal(fs.readFileSync(p, "utf8"), "héllo\nfrom the host\nappended\n");

    const bin = path.join(ws, "b.bin");
    await sb.write({ path: bin, content: bytes(0x00, 0xff, 0x01) });
    assert.deepEqual(fs.readFileSync(bin), Buffer.from([0x00, 0xff, 0x01]));
    const rb = await sb.read({ path: "b.bin" });
    assert.equal(rb.contentBase64, "AP8B");
    assert.equal(rb.content, undefined);
    assert.deepEqual(rb.bytes, bytes(0x00, 0xff, 0x01));
    // A Buffer is a Uint8Array; a view into a larger buffer sends its own bytes only.
    const big = Buffer.from([9, 9, 0xfe, 0x80, 9]);
    await sb.write({ path: bin, content: big.subarray(2, 4) });
    assert.deepEqual(fs.readFileSync(bin), Buffer.from([0xfe, 0x80]));

    // A window: bytes 1 to 4 of "héllo" are "éll".
    const rw = await sb.read({ path: "dir/notes.txt", offset: 1, limit: 4, mode: "text" });
    assert.equal(rw.content, "éll");
    assert.equal(rw.offset, 1);
    assert.equal(rw.eof, false);

    const perm = path.join(ws, "private.txt");
    await sb.write({ path: perm, content: "x", perm: "600" });
    assert.equal(fs.statSync(perm).mode & 0o777, 0o600);

    const st = await sb.stat({ path: "dir/notes.txt" });
    assert.equal(st.size, Buffer.byteLength("héllo\nfrom the host\nappended\n"));
    assert.equal(st.hostPath, p);
    const entries = await sb.list();
    const byPath = new Map(entries.map((e) => [e.path, e]));
    assert.equal(byPath.get(path.join(ws, ".env"))?.denied, true);
    assert.ok(byPath.has(path.join(ws, "dir")));
    const sub = await sb.list({ path: "dir" });
    assert.deepEqual(sub.map((e) => e.path), [p]);
  });

  it("says a file's type and its POSIX st_mode, as the host's stat has them", async () => {
    const d = path.join(ws, "modes");
    fs.mkdirSync(d, { mode: 0o750 });
    fs.chmodSync(d, 0o750);
    const f = path.join(d, "script.sh");
    fs.writeFileSync(f, "#!/bin/sh\n");
    fs.chmodSync(f, 0o741);
    const { S_IFMT, S_IFDIR, S_IFREG } = fs.constants;

    const sd = await sb.stat({ path: "modes" });
    assert.equal(sd.type, "dir");
    assert.equal(sd.mode & S_IFMT, S_IFDIR);
    assert.equal(sd.mode & 0o7777, 0o750);
    assert.equal(sd.mode, fs.statSync(d).mode, `mode ${sd.mode.toString(8)}, the host's ${fs.statSync(d).mode.toString(8)}`);

    const sf = await sb.stat({ path: "modes/script.sh" });
    assert.equal(sf.type, "file");
    assert.equal(sf.mode & S_IFMT, S_IFREG);
    assert.equal(sf.mode & 0o7777, 0o741);
    assert.equal(sf.mode, fs.statSync(f).mode);

    // A listing's entries and a read's answer say the same.
    const entry = (await sb.list()).find((e) => e.path === d);
    assert.deepEqual([entry?.type, entry?.mode], ["dir", fs.statSync(d).mode]);
    const [le] = await sb.list({ path: "modes" });
    assert.deepEqual([le?.type, le?.mode], ["file", fs.statSync(f).mode]);
    const rd = await sb.read({ path: "modes/script.sh" });
    assert.deepEqual([rd.type, rd.mode], ["file", fs.statSync(f).mode]);
  });

  it("reads a file a command wrote as the bytes it wrote", async () => {
    const r = await sb.exec({ command: "printf 'a\\377\\000b' > raw.bin" });
    assert.equal(r.exitCode, 0);
    assert.deepEqual(fs.readFileSync(path.join(ws, "raw.bin")), Buffer.from([0x61, 0xff, 0x00, 0x62]));
    const rd = await sb.read({ path: "raw.bin" });
    assert.deepEqual(rd.bytes, bytes(0x61, 0xff, 0x00, 0x62));
    assert.equal(rd.kind, "binary");
  });

  it("refuses a write outside the workspace, and nothing lands on the host", async () => {
    const p = path.join(outside, "from-api.txt");
    await rejectsHutch(sb.write({ path: p, content: "x" }), { status: 403, code: "denied" });
    assert.equal(fs.existsSync(p), false);
    const etc = "/etc/hutch-ts-client-test";
    await rejectsHutch(sb.write({ path: etc, content: "x" }), { status: 403 });
    assert.equal(fs.existsSync(etc), false);
  });

  it("kills a command at timeoutMs, and its sleep leaves the host's process table", async () => {
    // The timeout counts the sandbox's setup: on a machine busy enough to
    // spend most of it there, the sleep runs too briefly to be seen (or
    // not at all), which proves nothing; a longer timeout is tried then.
    let checked = false;
    for (const timeoutMs of [3000, 12_000, 48_000]) {
      const u = uniqueSleep();
      const start = Date.now();
      let seen: number[] = [];
      let res: Extract<ExecEvent, { type: "result" }> | undefined;
      for await (const ev of sb.execStream({ command: `echo started; exec sleep ${u}`, timeoutMs })) {
        if (ev.type === "stdout" && Buffer.from(ev.data).toString().includes("started") && seen.length === 0) {
          // The check itself must see a running sleep, or its "gone" proves nothing.
          seen = await waitFor(`sleep ${u} in the host's /proc`, () => {
            const p = hostSleeps(u);
            return p.length > 0 ? p : undefined;
          }, timeoutMs).catch(() => []);
        } else if (ev.type === "result") {
          res = ev;
        }
      }
      assert.ok(res, "no result");
      assert.ok(Date.now() - start < timeoutMs + 12_000, "the timeout did not stop it in time");
      assert.equal(res.result.killed, true);
      assert.equal(res.result.killReason, "timeout");
      assert.deepEqual(hostSleeps(u), [], `sleep ${u} still runs on the host after its result`);
      if (seen.length === 0) {
        continue; // never seen running: again with a longer timeout
      }
      assert.equal(res.exitCode, 128 + 15);
      for (const pid of seen) {
        assert.equal(fs.existsSync(`/proc/${pid}/cmdline`) && readOr(`/proc/${pid}/cmdline`).includes(u), false);
      }
      checked = true;
      break;
    }
    assert.ok(checked, "the sleep was never seen running within its timeout");

    // exec says the same. The timeout counts the sandbox's setup: one
    // that lands before the command runs kills at once (137, startup 0),
    // which says nothing of the SIGTERM; a machine busy enough to spend
    // the whole timeout on setup is given a longer one.
    let started = false;
    for (const timeoutMs of [300, 4000, 16000]) {
      const r = await sb.exec({ command: "sleep 30", timeoutMs });
      assert.equal(r.killed, true);
      assert.equal(r.killReason, "timeout");
      if (r.result.startupNs > 0) {
        assert.equal(r.exitCode, 143);
        started = true;
        break;
      }
    }
    assert.ok(started, "sleep never started within its timeout");
  });

  it("stops the command when the caller aborts", async () => {
    const u = uniqueSleep();
    const ac = new AbortController();
    const p = sb.exec({
      command: `echo started; exec sleep ${u}`,
      signal: ac.signal,
      onStdout: () => {
        void waitFor("the sleep", () => hostSleeps(u).length > 0, 5000).then(() => ac.abort(), () => ac.abort());
      },
    });
    await assert.rejects(p, (e: Error) => e.name === "AbortError");
    // The server sees the hang-up: SIGTERM, SIGKILL --kill-after (2s) later.
    await waitFor(`sleep ${u} gone from the host`, () => hostSleeps(u).length === 0, 10_000);
  });

  it("stops the command when an output callback throws, and rejects with its error", async () => {
    const u = uniqueSleep();
    const boom = new Error("callback failed");
    const p = sb.exec({
      command: `echo started; exec sleep ${u}`,
      onStdout: () => {
        throw boom;
      },
    });
    await assert.rejects(p, (e: unknown) => e === boom);
    await waitFor(`sleep ${u} gone from the host`, () => hostSleeps(u).length === 0, 10_000);
  });

  it("says an idle connection's timeout as such", async () => {
    const quiet = new Sandbox({ socketPath: srv.sock, idleTimeoutMs: 300 });
    await assert.rejects(quiet.exec({ command: "sleep 3" }), (e: unknown) => e instanceof HutchError && e.code === "timeout");
  });

  it("streams output as it comes, in order", async () => {
    // The command goes on only once the host has seen its first line: it
    // ends only if that line arrived before the end.
    const go = path.join(ws, "streamed");
    const seen: [string, string][] = [];
    const r = await sb.exec({
      command: `echo one; while [ ! -e ${go} ]; do sleep 0.05; done; echo two >&2; sleep 0.3; echo three`,
      timeoutMs: 20_000,
      onStdout: (c) => {
        seen.push(["stdout", Buffer.from(c).toString()]);
        fs.writeFileSync(go, "");
      },
      onStderr: (c) => seen.push(["stderr", Buffer.from(c).toString()]),
    });
    assert.equal(r.killed, false, "the first line did not come before the end");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "one\nthree\n");
    assert.equal(r.stderr, "two\n");
    assert.deepEqual(seen, [["stdout", "one\n"], ["stderr", "two\n"], ["stdout", "three\n"]]);
  });

  it("hands back output that is not UTF-8 as the bytes the command wrote", async () => {
    let r = await sb.exec({ command: "printf '\\377\\376ok\\n'" });
    assert.deepEqual(r.stdoutBytes, bytes(0xff, 0xfe, 0x6f, 0x6b, 0x0a));
    assert.equal(r.stdout, "\ufffd\ufffdok\n");
    // A character cut between two writes arrives whole.
    const chunks: Uint8Array[] = [];
    r = await sb.exec({ command: "printf '\\303'; sleep 0.3; printf '\\251\\n'", onStdout: (c) => chunks.push(c) });
    assert.equal(r.stdout, "é\n");
    assert.deepEqual(Buffer.concat(chunks), Buffer.from("é\n"));
    // Bytes of a base64 event and of a text event are joined before decoding.
    r = await sb.exec({ command: "printf 'a\\377\\303' >&2; sleep 0.3; printf '\\251z' >&2" });
    assert.deepEqual(r.stderrBytes, bytes(0x61, 0xff, 0xc3, 0xa9, 0x7a));
    assert.equal(r.stderr, "a\ufffdéz");
    // Many chunks, every byte value.
    r = await sb.exec({ argv: ["sh", "-c", "i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; i=$((i+1)); done"] });
    assert.deepEqual(r.stdoutBytes, new Uint8Array(Array.from({ length: 256 }, (_, i) => i)));
  });

  it("sends stdin given as bytes as they are, and hands back the bytes the command wrote", async () => {
    // Every byte value, then a stretch that is no UTF-8 (0xff, 0x00, a
    // lone continuation byte): the command writes its stdin to a file on
    // the host and back out.
    const all = new Uint8Array(Array.from({ length: 256 }, (_, i) => i));
    const input = new Uint8Array(Buffer.concat([all, bytes(0xff, 0x00, 0x80, 0x0a, 0xc3)]));
    const f = path.join(ws, "stdin.bin");
    let r = await sb.exec({ command: "cat > stdin.bin && cat stdin.bin", stdin: input });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(fs.readFileSync(f), Buffer.from(input), "the file the command wrote is not the stdin sent");
    assert.deepEqual(r.stdoutBytes, input, "stdout is not the bytes the command wrote");
    assert.deepEqual(Buffer.from(r.stdoutBytes), fs.readFileSync(f));

    // A Buffer (a Uint8Array) sends its own window only; an empty one is
    // an empty stdin, not none.
    const big = Buffer.from([1, 2, 0xfe, 0x00, 3]);
    r = await sb.exec({ argv: ["sh", "-c", "cat > stdin.bin"], stdin: big.subarray(2, 4) });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(fs.readFileSync(f), Buffer.from([0xfe, 0x00]));
    r = await sb.exec({ command: "wc -c", stdin: new Uint8Array(0) });
    assert.equal(r.stdout.trim(), "0");

    // More than a pipe's and a socket's buffers: 3 MiB of random bytes,
    // streamed through the command while its output comes back.
    const large = new Uint8Array(randomBytes(3 << 20));
    r = await sb.exec({ command: "tee stdin.bin", stdin: large, timeoutMs: 60_000 });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.ok(Buffer.from(fs.readFileSync(f)).equals(Buffer.from(large)), "the large stdin did not land whole");
    assert.ok(Buffer.from(r.stdoutBytes).equals(Buffer.from(large)), "the large stdout did not come back whole");

    // Text stdin is unchanged (sent in the request).
    r = await sb.exec({ command: "cat > stdin.bin", stdin: "héllo" });
    assert.equal(fs.readFileSync(f, "utf8"), "héllo");

    // A command that reads none of it ends all the same (a stdin sent
    // whole with the request: up to 64 KiB).
    r = await sb.exec({ command: "echo ignored", stdin: large.subarray(0, 60 << 10), timeoutMs: 60_000 });
    assert.deepEqual([r.exitCode, r.stdout, r.killed], [0, "ignored\n", false]);

    // A refused request with bytes for stdin rejects with the server's
    // refusal, never a failed write: the server answers without reading
    // the stdin, and closes the connection.
    const ran = path.join(ws, "stdin-ran");
    for (const stdin of [bytes(1, 2, 3), large, large, large]) {
      await rejectsHutch(sb.exec({ command: `touch ${ran}`, cwd: "/etc", stdin }), { status: 400, field: "cwd" });
    }
    assert.equal(fs.existsSync(ran), false);
  });

  it("runs concurrent commands on one Sandbox", async () => {
    // Each waits for the others' files: they end only if they run at once.
    const f = (n: number) => path.join(ws, `concurrent-${n}`);
    const rs = await Promise.all(
      [1, 2, 3].map((n) =>
        sb.exec({
          command: `touch ${f(n)}; while [ ! -e ${f(1)} ] || [ ! -e ${f(2)} ] || [ ! -e ${f(3)} ]; do sleep 0.05; done; echo ${n}`,
          timeoutMs: 20_000,
        }),
      ),
    );
    assert.deepEqual(rs.map((r) => [r.killed, r.stdout]), [[false, "1\n"], [false, "2\n"], [false, "3\n"]]);
  });

  it("names the field of a bad request (4xx), and the server goes on", async () => {
    await rejectsHutch(sb.exec({} as never), { status: 400, code: "bad_request", field: "argv" });
    await rejectsHutch(sb.exec({ command: "true", cwd: "/etc" }), { status: 400, field: "cwd" });
    await rejectsHutch(sb.exec({ command: "true", timeoutMs: -1 }), { status: 400, field: "timeoutMs", wireField: "timeout_ms" });
    await rejectsHutch(sb.exec({ command: "true", env: { "A=B": "x" } }), { status: 400, field: "env" });
    await rejectsHutch(sb.exec({ command: "true", timeoutMs: "soon" as never }), { status: 400, field: "timeoutMs" });
    await rejectsHutch(sb.read({ path: "" }), { status: 400, field: "path" });
    await rejectsHutch(sb.write({ path: path.join(ws, "p.txt"), content: "x", perm: "644x" }), { status: 400, field: "perm" });
    assert.equal(fs.existsSync(path.join(ws, "p.txt")), false);
    await rejectsHutch(sb.read({ path: "no-such-file" }), { status: 404, code: "not_found" });
    assert.equal((await sb.health()).status, "ok");
  });

  it("refuses an option it does not know before sending anything", async () => {
    const ran = path.join(ws, "typo-ran");
    for (const opts of [
      { command: `touch ${ran}`, timeoutMS: 5 },
      { command: `touch ${ran}`, timeout_ms: 5 },
      { command: `touch ${ran}`, allowed_domains: ["example.com"] },
    ]) {
      const bad = Object.keys(opts)[1]!;
      await assert.rejects(sb.exec(opts as never), (e: unknown) => {
        assert.ok(e instanceof HutchOptionError, String(e));
        assert.ok(e instanceof TypeError);
        assert.equal(e.code, "unknown_option");
        assert.equal(e.field, bad);
        assert.match(e.message, new RegExp(`"${bad}"`));
        return true;
      });
    }
    await assert.rejects(sb.exec({ command: `touch ${ran}`, timeout_ms: 5 } as never), /did you mean timeoutMs/);
    assert.equal(fs.existsSync(ran), false, "a call with a misspelled option ran");

    const w = path.join(ws, "typo-write.txt");
    await assert.rejects(sb.write({ path: w, content: "x", apend: true } as never), (e: unknown) => e instanceof HutchOptionError && e.field === "apend");
    await assert.rejects(sb.write({ path: w, content: 5 } as never), (e: unknown) => e instanceof HutchOptionError && e.field === "content");
    assert.equal(fs.existsSync(w), false);
    await assert.rejects(sb.read({ path: "x", no_follow: true } as never), (e: unknown) => e instanceof HutchOptionError && e.field === "no_follow");
    await assert.rejects(sb.processes.logs({ id: "x", tail: 4 } as never), (e: unknown) => e instanceof HutchOptionError && e.field === "tail");
    assert.throws(() => new Sandbox({ socket: srv.sock } as never), (e: unknown) => e instanceof HutchOptionError && e.field === "socket");
    await assert.rejects(sb.exec({ command: "true", onStdout: "print" } as never), (e: unknown) => e instanceof HutchOptionError && e.field === "onStdout");
  });

  it("answers GET /v1/policy without a policy file: the flags' policy, which a reload leaves as it is", async () => {
    const p = await sb.policy();
    assert.equal(p.policy["Workspace"], ws);
    assert.equal(p.policy["Network"], "none");
    assert.ok(!p.policy["Writable"], JSON.stringify(p.policy));
    assert.deepEqual([p.killAfterMs, p.grantable], [2000, []]);
    assert.deepEqual(await sb.reload(), { status: "reloaded", workspace: ws });
    assert.deepEqual(await sb.policy(), p);
    const target = path.join(outside, "after-reload.txt");
    const r = await sb.exec({ command: `touch ${target}` });
    assert.notEqual(r.exitCode, 0);
    assert.equal(fs.existsSync(target), false, "a write outside the workspace reached the host after a reload");
  });

  it("fails clearly on a socket nobody serves", async () => {
    const dead = new Sandbox({ socketPath: path.join(srv.sockdir, "nobody.sock") });
    await assert.rejects(dead.health(), (e: NodeJS.ErrnoException) => e.code === "ENOENT");
  });
});

// ---------------------------------------------------------------------------

describe("durable processes", () => {
  let srv: Server;
  let sb: Sandbox;
  let ws: string;
  const started: string[] = [];

  before(async () => {
    srv = new Server("proc");
    ws = srv.ws;
    await srv.start([]);
    sb = srv.sb;
  });

  after(async () => {
    // They outlive the server: stop ours, whatever a test left.
    for (const id of started) {
      await sb.processes.stop({ id }).catch(() => undefined);
    }
    await srv?.stop();
  });

  async function startSleeper(name: string, extra = ""): Promise<{ rec: ProcessRecord; u: string }> {
    const u = uniqueSleep();
    const rec = await sb.processes.start({ command: `${extra}echo started-${name}; exec sleep ${u}`, name, restart: "never" });
    started.push(rec.id);
    return { rec, u };
  }

  it("publishes a process's port on the host's loopback until it stops, checked from the host", async () => {
    const token = `page-${Date.now()}`;
    fs.writeFileSync(path.join(ws, "page.txt"), token);
    const rec = await sb.processes.start({ argv: ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"], name: "web", publish: ["0:8000"] });
    started.push(rec.id);
    assert.equal(rec.published?.length, 1);
    const pub = rec.published![0]!;
    assert.deepEqual([pub.hostIp, pub.port], ["127.0.0.1", 8000]);
    const body = await waitFor("the page through the published port", () => hostGet(pub.hostPort, "/page.txt"), 30_000);
    assert.equal(body, token);
    await sb.processes.stop({ id: rec.id });
    assert.equal(await hostGet(pub.hostPort, "/page.txt"), undefined);
  });

  it("publishes an exec's port while it runs: the host port first, the connection in the result", async () => {
    const echo = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 9000)); s.listen(); c, _ = s.accept(); c.sendall(c.recv(100)); c.close()";
    const events = sb.execStream({ argv: ["python3", "-c", echo], publish: ["0:9000"] });
    const first = (await events.next()).value as ExecEvent;
    assert.equal(first.type, "published");
    const port = first.type === "published" ? first.published[0]!.hostPort : 0;
    const back = await waitFor("the echo through the published port", () => hostEcho(port, "ping"), 30_000);
    assert.equal(back, "ping");
    let end: ExecEvent | undefined;
    for await (const ev of events) {
      end = ev;
    }
    assert.equal(end?.type, "result");
    if (end?.type === "result") {
      assert.equal(end.exitCode, 0);
      assert.equal(end.result.published?.[0]?.hostPort, port);
    }
    await rejectsHutch(sb.exec({ command: "true", publish: ["0.0.0.0:0:80"] }), { status: 400, code: "bad_request", field: "publish" });
  });

  it("starts, lists, logs, stops and removes a process, checked on the host", async () => {
    const out = path.join(ws, "proc-out.txt");
    const { rec, u } = await startSleeper("ts-one", `echo from-process > ${out}; `);
    assert.match(rec.id, /^[0-9a-zA-Z_-]{12}$/);
    assert.equal(rec.name, "ts-one");
    assert.deepEqual(rec.args.slice(0, 2), ["sh", "-c"]);
    assert.ok(["starting", "running"].includes(rec.status), rec.status);
    assert.equal(rec.desired, "running");

    await waitFor(`sleep ${u} on the host`, () => hostSleeps(u).length > 0);
    await waitFor("the process's file on the host", () => readOr(out) === "from-process\n");
    const got = await waitFor("status running", async () => {
      const r = await sb.processes.get({ id: rec.id });
      return r.status === "running" ? r : undefined;
    });
    assert.ok((got.pid ?? 0) > 0);
    assert.ok(fs.existsSync(got.log), `the log ${got.log} is not on the host`);

    const logs = await waitFor("the log", async () => {
      const l = await sb.processes.logs({ id: rec.id });
      return l.content?.includes("started-ts-one") ? l : undefined;
    });
    assert.equal(logs.id, rec.id);
    assert.deepEqual(Buffer.from(logs.bytes).toString(), logs.content);
    const tail = await sb.processes.logs({ id: rec.id, tailBytes: 4 });
    assert.ok(tail.length <= 4, `tailBytes 4 gave ${tail.length} bytes`);
    assert.equal(tail.content, "one\n");

    const list = await sb.processes.list();
    assert.ok(list.some((p) => p.id === rec.id && p.name === "ts-one"));

    await rejectsHutch(sb.processes.remove({ id: rec.id }), { status: 409, code: "active" });
    assert.ok(hostSleeps(u).length > 0, "a refused remove stopped the process");

    const stopped = await sb.processes.stop({ id: rec.id });
    assert.equal(stopped.status, "stopped");
    assert.equal(stopped.desired, "stopped");
    assert.deepEqual(hostSleeps(u), [], `sleep ${u} still runs on the host after stop`);

    assert.deepEqual(await sb.processes.remove({ id: rec.id }), { removed: rec.id });
    await rejectsHutch(sb.processes.get({ id: rec.id }), { status: 404, code: "not_found" });
    assert.ok(!(await sb.processes.list()).some((p) => p.id === rec.id));
  });

  it("keeps a process's output that is not UTF-8 as its bytes", async () => {
    const u = uniqueSleep();
    const rec = await sb.processes.start({ argv: ["sh", "-c", `printf 'x\\377y'; exec sleep ${u}`], restart: "never" });
    started.push(rec.id);
    const l = await waitFor("the log", async () => {
      const l = await sb.processes.logs({ id: rec.id });
      return l.length >= 3 ? l : undefined;
    });
    assert.deepEqual(l.bytes, bytes(0x78, 0xff, 0x79));
    assert.equal(typeof l.contentBase64, "string");
    await sb.processes.stop({ id: rec.id });
    assert.deepEqual(hostSleeps(u), []);
    await sb.processes.remove({ id: rec.id });
  });

  it("stops them all", async () => {
    const a = await startSleeper("ts-a");
    const b = await startSleeper("ts-b");
    await waitFor("both sleeps on the host", () => hostSleeps(a.u).length > 0 && hostSleeps(b.u).length > 0);
    const recs = await sb.processes.stopAll();
    for (const { rec } of [a, b]) {
      const r = recs.find((x) => x.id === rec.id);
      assert.ok(r, `stopAll's answer lacks ${rec.id}`);
      assert.equal(r.status, "stopped");
    }
    assert.deepEqual([hostSleeps(a.u), hostSleeps(b.u)], [[], []]);
    for (const { rec } of [a, b]) {
      await sb.processes.remove({ id: rec.id });
    }
  });

  it("names the field of a bad request", async () => {
    await rejectsHutch(sb.processes.get({ id: "nosuchid0000" }), { status: 404, code: "not_found" });
    await rejectsHutch(sb.processes.start({ command: "true", restart: "sometimes" as never }), { status: 400, field: "restart" });
    await rejectsHutch(sb.processes.start({} as never), { status: 400, field: "argv" });
    await rejectsHutch(sb.processes.logs({ id: "nosuchid0000", tailBytes: -1 }), { status: 400, field: "tailBytes", wireField: "tail_bytes" });
  });

  it("refuses a cwd outside the workspace as the request's fault (400 cwd), as exec does", async () => {
    const before = (await sb.processes.list()).length;
    await rejectsHutch(sb.processes.start({ command: "true", cwd: "/etc" }), { status: 400, code: "bad_request", field: "cwd" });
    assert.equal((await sb.processes.list()).length, before, "a refused start left a record");
  });
});

// ---------------------------------------------------------------------------

describe("policy", () => {
  let srv: Server;
  let sb: Sandbox;
  let policy: string;

  const writePolicy = (text: string) => {
    // As an editor saves: a new file renamed over the old.
    fs.writeFileSync(policy + ".tmp", text);
    fs.renameSync(policy + ".tmp", policy);
  };

  before(async () => {
    srv = new Server("policy");
    policy = path.join(srv.base, "policy.toml");
    writePolicy(`version = 1\n[sandbox]\nenv = ["HUTCH_TS_PHASE=before"]\n`);
    await srv.start(["--policy", policy, "--grantable", "@network"]);
    sb = srv.sb;
  });

  after(async () => {
    await srv?.stop();
  });

  it("answers the policy in effect, before and after a reload, and keeps it when a reload is refused", async () => {
    const ws = srv.ws;
    // Each command says, on the host, the phase of the policy it ran
    // under and whether it could write outside the workspace.
    const run = async (tag: string) => {
      const r = await sb.exec({ command: `echo "$HUTCH_TS_PHASE" > phase-${tag}; echo ${tag} > ${srv.outside}/${tag}` });
      return [r.exitCode === 0, readOr(path.join(ws, `phase-${tag}`)), readOr(path.join(srv.outside, tag), "none")];
    };
    let p: ServerPolicy = await sb.policy();
    assert.equal(p.policy["Workspace"], ws);
    assert.deepEqual(p.policy["Env"], ["HUTCH_TS_PHASE=before"]);
    assert.ok(!p.policy["Writable"], JSON.stringify(p.policy));
    assert.deepEqual([p.killAfterMs, p.grantable], [2000, ["@network"]]);
    assert.deepEqual(await run("1"), [false, "before\n", "none"]);

    // Changed, the file is not in effect until a reload.
    writePolicy(`version = 1\n[sandbox]\nenv = ["HUTCH_TS_PHASE=after"]\nwritable = [${JSON.stringify(srv.outside)}]\n`);
    assert.deepEqual(await sb.policy(), p);
    assert.deepEqual(await sb.reload(), { status: "reloaded", workspace: ws });
    p = await sb.policy();
    assert.deepEqual([p.policy["Env"], p.policy["Writable"]], [["HUTCH_TS_PHASE=after"], [srv.outside]]);
    assert.deepEqual(await run("2"), [true, "after\n", "2\n"]);

    // A policy that does not build is refused, and the one in effect
    // stays: in the answer and on the host.
    writePolicy(`version = 1\n[sandbox]\nmemory = "1k"\n`);
    const e = await rejectsHutch(sb.reload(), { status: 400, code: "bad_request" });
    assert.match(e.message, /Memory/);
    assert.deepEqual(await sb.policy(), p);
    assert.deepEqual(await run("3"), [true, "after\n", "3\n"]);
  });

  it("says a server that serves no policy routes as the API's 404 not_found", async () => {
    // What a localapi.Handler built without Options.Policy and Reload
    // answers (hutch serve always serves them).
    const sock = path.join(srv.sockdir, "no-policy.sock");
    const seen: string[] = [];
    const fake = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      req.resume();
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: { code: "not_found", message: `no route ${req.url}; routes: /v1/exec, /v1/health` } }));
    });
    await new Promise<void>((resolve) => fake.listen(sock, resolve));
    try {
      const other = new Sandbox({ socketPath: sock });
      await rejectsHutch(other.policy(), { status: 404, code: "not_found" });
      await rejectsHutch(other.reload(), { status: 404, code: "not_found" });
      assert.deepEqual(seen, ["GET /v1/policy", "POST /v1/policy/reload"]);
    } finally {
      await new Promise<void>((resolve) => fake.close(() => resolve()));
    }
  });
});

describe("approvals", () => {
  let srv: Server;
  let sb: Sandbox;
  let db: string;
  let rules: string;

  /** `hutch grants --db DB ARGS...`, as the user runs it beside the
   * server: what it printed, as JSON. */
  const grants = (...args: string[]): unknown => {
    const r = spawnSync(hutchBin(), ["grants", "--db", db, ...args], { encoding: "utf8" });
    assert.equal(r.status, 0, `hutch grants ${args.join(" ")}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };

  before(async () => {
    srv = new Server("approvals");
    db = path.join(srv.base, "grants", "grants.db");
    rules = path.join(srv.base, "rules.toml");
    fs.writeFileSync(rules, `[tools.write]\ndecision = "prompt"\n`);
    await srv.start(["--rules", rules, "--grants-db", db]);
    sb = srv.sb;
  });

  after(async () => {
    await srv?.stop();
  });

  it("judges calls as hutch grants decide does, by the grants the user remembers meanwhile", async () => {
    const ws = srv.ws;
    const scope = ["--agent", "coder", "--workspace", ws];
    const calls: [string, string, Verdict["decision"]][] = [
      ["bash", "npm test && ls", "allow"],
      ["bash", "npm test; rm -rf ~", "prompt"],
      ["bash", "ls; sudo rm -rf /", "deny"],
      ["bash", "echo $(sudo id)", "deny"],
      ["write", "src/a.ts", "allow"],
      ["write", ".env", "deny"],
      ["read_file", "/etc/passwd", "allow"],
    ];
    assert.equal((await sb.decide({ tool: "bash", arg: "npm test && ls", agent: "coder", workspace: ws })).decision, "prompt");
    for (const [tool, pattern, decision] of [
      ["bash", "npm test*", "allow"],
      ["bash", "ls", "allow"],
      ["bash", "sudo *", "deny"],
      ["write", "src/*", "allow"],
      ["write", ".env", "deny"],
    ]) {
      grants("add", "--tool", tool!, "--pattern", pattern!, "--decision", decision!, ...scope);
    }
    for (const [tool, arg, want] of calls) {
      const v = await sb.decide({ tool, arg, agent: "coder", workspace: ws });
      assert.deepEqual(v, grants("decide", "--rules", rules, "--tool", tool, "--arg", arg, ...scope), `${tool} ${arg}`);
      assert.equal(v.decision, want, `${tool} ${arg}: ${JSON.stringify(v)}`);
    }
    const both = await sb.decide({ tool: "bash", arg: "npm test && ls", agent: "coder", workspace: ws });
    assert.equal(both.grants?.length, 2);
    // The grants are coder's, in this workspace.
    assert.equal((await sb.decide({ tool: "bash", arg: "npm test", agent: "other", workspace: ws })).decision, "prompt");
  });

  it("lists the rules as hutch grants rules --json does, and names a bad request's field", async () => {
    const listed = await sb.approvalRules();
    assert.deepEqual(listed, grants("rules", "--rules", rules, "--json"));
    assert.ok(listed.some((r) => r.tool === "write" && r.decision === "prompt" && !r.shell));
    await rejectsHutch(sb.decide({ tool: "", arg: "ls" }), { status: 400, code: "bad_request", field: "tool", wireField: "tool" });
    await assert.rejects(sb.decide({ tool: "bash", command: "ls" } as never), HutchOptionError);
  });
});

// ---------------------------------------------------------------------------

/** An HTTP server on the host's loopback that counts its requests by path. */
async function hostServer(): Promise<{ port: number; hits: Map<string, number>; close: () => Promise<void> }> {
  const hits = new Map<string, number>();
  const s = http.createServer((req, res) => {
    hits.set(req.url ?? "", (hits.get(req.url ?? "") ?? 0) + 1);
    res.end(`host server saw ${req.url}`);
  });
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const addr = s.address();
  assert.ok(addr && typeof addr === "object");
  return { port: addr.port, hits, close: () => new Promise((resolve) => s.close(() => resolve())) };
}

function haveCurl(): boolean {
  return spawnSync("curl", ["--version"], { stdio: "ignore" }).status === 0;
}

describe("grants: allowedDomains, packageManagers, grant within --grantable", () => {
  let srv: Server;
  let sb: Sandbox;
  let host: Awaited<ReturnType<typeof hostServer>>;

  before(async () => {
    host = await hostServer();
    srv = new Server("grant");
    // The policy's network is the proxy to nothing; a call may be granted
    // localhost only. The proxy may reach the host server's loopback port.
    await srv.start(["--net", "allow", "--allow-local", `127.0.0.1:${host.port}`, "--grantable", "@network", "--grantable", "domain:localhost"]);
    sb = srv.sb;
  });

  after(async () => {
    await srv?.stop();
    await host?.close();
  });

  // hutch points the proxy variables at its proxy and keeps localhost off
  // it (NO_PROXY): the host server is reached through the proxy here.
  const env = { NO_PROXY: "", no_proxy: "" };
  const curl = (p: string, name: string, port: number) => `curl -fsS --max-time 10 http://${name}:${port}${p}`;

  it("reaches an allowed domain only when the call asks for it", { skip: !haveCurl() && "no curl on this host" }, async () => {
    let r = await sb.exec({ command: curl("/none", "localhost", host.port), env });
    assert.notEqual(r.exitCode, 0, `curl without a grant: ${r.stdout}${r.stderr}`);
    assert.equal(host.hits.get("/none") ?? 0, 0, "the host server was reached without a grant");

    r = await sb.exec({ command: curl("/ok", "localhost", host.port), env, allowedDomains: [`localhost:${host.port}`] });
    assert.equal(r.exitCode, 0, `curl with allowedDomains: ${r.stderr}`);
    assert.equal(r.stdout, "host server saw /ok");
    assert.equal(host.hits.get("/ok"), 1);
    assert.equal(r.result.network, "allow");
    assert.ok(r.result.networkEvents?.some((e) => e.host === "localhost" && e.allowed), JSON.stringify(r.result.networkEvents));

    r = await sb.exec({ command: curl("/other", "refused.invalid", 80), env, allowedDomains: [`localhost:${host.port}`] });
    assert.notEqual(r.exitCode, 0);
    assert.ok(r.result.networkEvents?.some((e) => e.host === "refused.invalid" && !e.allowed), JSON.stringify(r.result.networkEvents));

    r = await sb.exec({ command: curl("/grant", "localhost", host.port), env, grant: ["@network", `domain:localhost:${host.port}`] });
    assert.equal(r.exitCode, 0, `curl with grant: ${r.stderr}`);
    assert.equal(host.hits.get("/grant"), 1);
  });

  it("refuses a grant beyond the ceiling (403 not_permitted, the field named) and runs nothing", async () => {
    const ran = path.join(srv.ws, "granted-ran");
    await rejectsHutch(sb.exec({ command: `touch ${ran}`, grant: ["@host-network"] }), { status: 403, code: "not_permitted", field: "grant" });
    await rejectsHutch(sb.exec({ command: `touch ${ran}`, allowedDomains: ["example.com"] }), {
      status: 403, code: "not_permitted", field: "allowedDomains", wireField: "allowed_domains",
    });
    await rejectsHutch(sb.exec({ command: `touch ${ran}`, packageManagers: ["python"] }), {
      status: 403, code: "not_permitted", field: "packageManagers", wireField: "package_managers",
    });
    await rejectsHutch(sb.exec({ command: `touch ${ran}`, grant: [`write:${srv.outside}`] }), { status: 403, code: "not_permitted", field: "grant" });
    await rejectsHutch(sb.exec({ command: `touch ${ran}`, grant: ["@nonsense"] }), { status: 400, field: "grant" });
    await rejectsHutch(sb.processes.start({ command: `touch ${ran}`, grant: ["@host-network"] }), { status: 403, code: "not_permitted", field: "grant" });
    assert.equal(fs.existsSync(ran), false, "a refused call ran");
  });
});

// ---------------------------------------------------------------------------

describe("policy reload", () => {
  let srv: Server;
  let sb: Sandbox;
  let policy: string;
  let extra: string;

  const writePolicy = (phase: string, writable: string[]) =>
    fs.writeFileSync(
      policy,
      `version = 1\n[sandbox]\nenv = ["HUTCH_TS_PHASE=${phase}"]\nwritable = ${JSON.stringify(writable)}\n`,
    );

  before(async () => {
    srv = new Server("reload");
    policy = path.join(srv.base, "policy.toml");
    extra = path.join(srv.outside, "extra");
    fs.mkdirSync(extra);
    writePolicy("before", []);
    await srv.start(["--policy", policy]);
    sb = srv.sb;
  });

  after(async () => {
    await srv?.stop();
  });

  it("puts a changed policy file in effect for the commands after it, not those running", async () => {
    const ws = srv.ws;
    const script = (tag: string) => `echo "$HUTCH_TS_PHASE" > ${ws}/phase-${tag}.txt; echo x > ${extra}/${tag}.txt`;
    let r = await sb.exec({ command: script("1") });
    assert.notEqual(r.exitCode, 0);
    assert.equal(readOr(path.join(ws, "phase-1.txt")), "before\n");
    assert.equal(fs.existsSync(path.join(extra, "1.txt")), false, "a write to a tree the policy does not open landed");

    // A command started under the old policy...
    const go = path.join(ws, "go");
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    const running = sb.exec({
      command: `echo ready; while [ ! -e ${go} ]; do sleep 0.05; done; ${script("during")}`,
      onStdout: () => ready(),
      timeoutMs: 30_000,
    });
    await isReady;

    writePolicy("after", [extra]);
    const rl = await sb.reload();
    assert.equal(rl.status, "reloaded");

    // ...keeps it.
    fs.writeFileSync(go, "");
    r = await running;
    assert.notEqual(r.exitCode, 0);
    assert.equal(readOr(path.join(ws, "phase-during.txt")), "before\n");
    assert.equal(fs.existsSync(path.join(extra, "during.txt")), false, "a command running across the reload got the new policy");

    r = await sb.exec({ command: script("2") });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(readOr(path.join(ws, "phase-2.txt")), "after\n");
    assert.equal(readOr(path.join(extra, "2.txt")), "x\n");
  });
});
