/**
 * A client of hutch's local API (`hutch serve`), Node's standard library
 * only (node:http over a unix socket).
 *
 *     import { Sandbox } from "hutch-client";
 *
 *     const sandbox = new Sandbox({ socketPath: "/run/user/1000/hutch/hutch.sock" });
 *     const r = await sandbox.exec({ command: "make test", cwd: "src", timeoutMs: 60_000 });
 *     r.exitCode, r.stdout, r.stderr, r.result.wallNs
 *     (await sandbox.read({ path: "notes.md" })).content
 *     await sandbox.write({ path: "/abs/path/in/workspace.txt", content: "text" });
 *
 * The protocol is JSON over HTTP/1.1 on a unix socket, snake_case on the
 * wire; this client speaks camelCase both ways (`timeoutMs` is sent as
 * `timeout_ms`, `exit_code` comes back as `exitCode`). An option it does
 * not know is refused before anything is sent (HutchOptionError, a
 * TypeError), never dropped: a misspelled `timeoutMs` would otherwise run
 * a command unbounded. A refusal of the server is a HutchError with its
 * status, code, message and field.
 */

import * as http from "node:http";
import { Buffer } from "node:buffer";

/** The protocol version this client speaks: the N of /vN/. */
export const PROTOCOL_VERSION = 1;

// ---------------------------------------------------------------------------
// Errors

/**
 * An error response of the server (status >= 400), or a response the
 * client could not read (status 0 when there was no HTTP status to give:
 * code "truncated" for an exec stream that ended before its result,
 * "protocol" for a line that is not JSON).
 */
export class HutchError extends Error {
  /** The HTTP status: 400 the request's fault, 403 refused, 404, 409... */
  readonly status: number;
  /** The API's word for it: bad_request, bad_path, denied, private,
   * not_found, too_large, leak, not_permitted, active, unsupported,
   * unavailable, method_not_allowed, internal. */
  readonly code: string;
  /** The option at fault, in this client's words (timeoutMs), when the
   * server named one. */
  readonly field: string | undefined;
  /** The same field as the server named it on the wire (timeout_ms). */
  readonly wireField: string | undefined;

  constructor(status: number, code: string, message: string, field?: string, wireField?: string) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.wireField = wireField ?? field;
  }

  override toString(): string {
    return `HutchError: ${this.status} ${this.code}: ${this.field ? this.field + ": " : ""}${this.message}`;
  }
}
Object.defineProperty(HutchError.prototype, "name", { value: "HutchError", configurable: true, writable: true });

/**
 * A caller's mistake found before anything was sent: an option this
 * client does not know (code "unknown_option", field the key as given),
 * or a value it cannot send (code "bad_option"). It is a TypeError with
 * HutchError's fields; status is 0.
 */
export class HutchOptionError extends TypeError {
  readonly status = 0;
  readonly code: "unknown_option" | "bad_option";
  readonly field: string;
  readonly wireField: string | undefined = undefined;

  constructor(code: "unknown_option" | "bad_option", field: string, message: string) {
    super(message);
    this.code = code;
    this.field = field;
  }
}
Object.defineProperty(HutchOptionError.prototype, "name", { value: "HutchOptionError", configurable: true, writable: true });

// ---------------------------------------------------------------------------
// What comes back (camelCase; every object may carry fields added by a
// later server, kept as they come)

/** GET /v1/health. */
export interface Health {
  status: string;
  /** The workspace's absolute path. */
  workspace: string;
  prewarmed: number;
  [key: string]: unknown;
}

/** GET /v1/version. */
export interface Version {
  protocol: number;
  hutchVersion: string;
  [key: string]: unknown;
}

/** GET /v1/policy: the policy the server's commands run under. */
export interface ServerPolicy {
  /** hutch's runtime.Policy as the server's flags and --policy file say it
   * (as the last reload read them), its keys as Go names them
   * ("Workspace", "Writable", "Deny", "Env", "Network", "Memory"...; the
   * snake_case keys of the objects in it camelCased, as every answer's),
   * before what the server adds: its grant ceiling, its hidden
   * directories, its pool. */
  policy: Record<string, unknown>;
  /** The grace between a stop's SIGTERM and its SIGKILL (--kill-after). */
  killAfterMs: number;
  /** The ceiling of a call's grant (--grantable), as permission tags
   * ("@network", "write:/path"...). */
  grantable: string[];
  [key: string]: unknown;
}

/** POST /v1/policy/reload. */
export interface Reloaded {
  /** "reloaded". */
  status: string;
  /** The workspace's absolute path. */
  workspace: string;
  [key: string]: unknown;
}

/** POST /v1/approvals/decide: the server's judgment of a tool call, as
 * `hutch grants decide` prints it. */
export interface Verdict {
  /** "allow": make the call; "deny": refuse it; "prompt": ask the user
   * (a grant they remember is theirs to add, with `hutch grants add`). */
  decision: "allow" | "prompt" | "deny";
  danger: "low" | "medium" | "high";
  reason: string;
  /** The remembered grant that decided, if one did. */
  grant?: number;
  /** All those that did, when a shell call's commands were allowed by
   * several (grant is the first). */
  grants?: number[];
  [key: string]: unknown;
}

/** A tool's rule, of GET /v1/approvals/rules (`hutch grants rules --json`). */
export interface ApprovalRule {
  tool: string;
  decision: "allow" | "prompt" | "deny";
  danger: "low" | "medium" | "high";
  /** The tool's argument is a command line, judged command by command. */
  shell: boolean;
  [key: string]: unknown;
}

/** One connection attempt through the egress proxy. */
export interface NetworkEvent {
  time: string;
  protocol: string;
  host: string;
  port: number;
  addr?: string;
  allowed: boolean;
  rule?: string;
  reason?: string;
  [key: string]: unknown;
}

/** The command's runtime.Result, as `hutch run --result-json` writes its
 * fields, camelCased (exit_code is exitCode, wall_ns wallNs...). */
export interface Result {
  /** The command's exit status, or -1 if a signal ended it. */
  exitCode: number;
  /** The signal that ended it, or absent. */
  signal?: number;
  wallNs: number;
  startupNs: number;
  killed: boolean;
  /** "timeout", "context canceled", "output limit", "sandbox died", "stopped". */
  killReason?: string;
  truncated?: boolean;
  prewarmed?: boolean;
  layers: string[] | null;
  level: string;
  network: string;
  networkEvents?: NetworkEvent[];
  /** The sandbox's published ports (publish), host ports chosen. */
  published?: Published[];
  /** The connections forwarded in through them: peer, hostPort, port,
   * bytesIn, bytesOut. */
  ingress?: Record<string, unknown>[];
  /** What the command was refused while it ran, by kind, with the rule
   * and how to allow each; denialsDropped counts the refusals of kinds
   * beyond the first 64. */
  denials?: Denial[];
  denialsDropped?: number;
  reason?: string;
  error?: string;
  [key: string]: unknown;
}

/** One kind of refusal a command ran into (runtime.Denial). */
export interface Denial {
  /** What saw it: "file", "seccomp", "unix-wall", "network", "pid-namespace". */
  source: string;
  /** The operation: a file access ("write", "read") or a system call. */
  op: string;
  object?: string;
  errno?: string;
  count: number;
  rule: string;
  reason: string;
  /** How the caller could allow it: run's flag, a policy file's key, a grant's tag. */
  allow?: { flag?: string; key?: string; grant?: string };
}

/** A finished command. */
export interface ExecResult {
  /** What `hutch run` would exit with: the command's status, 128+N for
   * signal N, 126 cannot execute, 127 not found, 125 hutch failed. */
  exitCode: number;
  /** The output, its bytes joined then decoded as UTF-8 (an invalid
   * sequence becomes U+FFFD). */
  stdout: string;
  stderr: string;
  /** The output's bytes as the command wrote them. */
  stdoutBytes: Uint8Array;
  stderrBytes: Uint8Array;
  result: Result;
  /** Why the command did not run, or what went wrong copying its output. */
  error?: string;
  killed: boolean;
  /** result.killReason, or "". */
  killReason: string;
}

/** A published port: hostIp:hostPort on the host reaches the sandbox's
 * 127.0.0.1:port. */
export interface Published {
  hostIp: string;
  hostPort: number;
  port: number;
  protocol: string;
}

/** An exec's events, as they arrive: with publish, the host ports first;
 * its output, then its end, once. */
export type ExecEvent =
  | { type: "published"; published: Published[] }
  | { type: "stdout" | "stderr"; data: Uint8Array }
  | { type: "result"; exitCode: number; result: Result; error?: string };

/** A file's type as the file doors say it ("type"). */
export type FileType = "file" | "dir" | "symlink" | "fifo" | "socket" | "char_device" | "block_device" | "other";

/** A file the file door reached. */
/** POST /v1/explain's answer: which rule decides a path for an access
 * (runtime.Explanation), keys camelCased. */
export interface Explanation {
  /** The path as asked. */
  path: string;
  /** The path as a command's kernel would reach it, symlinks followed in the sandbox's view. */
  view: string;
  hostPath?: string;
  access: "read" | "write" | "execute";
  allowed: boolean;
  /** The kind of rule (runtime.Rule): "default-deny", "deny-name", "git-guard", "outside-writable"... */
  rule: string;
  /** The rule in a sentence, naming the path it is on. */
  reason: string;
  /** How the caller could allow a refused access: run's flag, the policy file's key, a grant's tag. */
  allow?: { flag?: string; key?: string; grant?: string };
  [key: string]: unknown;
}

export interface FileInfo {
  /** The path as a command of the sandbox names it, symlinks resolved. */
  path: string;
  homePath?: string;
  /** The same file on the host. */
  hostPath: string;
  size: number;
  /** The file's type as a word. */
  type: FileType;
  /** The POSIX st_mode: type bits, set-id and sticky bits, permissions,
   * as fs.Stats.mode has them (a directory 0o40755 is 16877):
   * `(mode & fs.constants.S_IFMT) === fs.constants.S_IFDIR`, `mode & 0o777`. */
  mode: number;
  modTime: string;
  writable: boolean;
  /** In a listing: masked to commands. */
  denied?: boolean;
  /** In a listing: a command sees its own filesystem there. */
  private?: boolean;
  [key: string]: unknown;
}

/** POST /v1/files/read. */
export interface ReadResult extends FileInfo {
  /** "text", "binary" or "image". */
  kind: string;
  /** The content when it is text... */
  content?: string;
  /** ...else its base64, as it came. */
  contentBase64?: string;
  /** The bytes read, whichever way they came. */
  bytes: Uint8Array;
  /** How many bytes were read. */
  length: number;
  offset: number;
  eof: boolean;
  mime?: string;
  width?: number;
  height?: number;
}

/** A durable process's record (POST /v1/processes/*). */
export interface ProcessRecord {
  id: string;
  name?: string;
  args: string[];
  created: string;
  /** "running", "starting", "backoff", "stopping", "stopped", "exited", "failed", "stale". */
  status: string;
  /** "running" or "stopped". */
  desired: string;
  reason?: string;
  restart: string;
  pid?: number;
  restarts: number;
  runs?: ProcessRun[];
  /** The log file on the host. */
  log: string;
  /** The host ports that reach it (publish), held across its restarts. */
  published?: Published[];
  [key: string]: unknown;
}

export interface ProcessRun {
  started: string;
  ended?: string;
  pid?: number;
  exitCode: number;
  signal?: string;
  error?: string;
  /** What the run was refused, by which rule: those recorded so far
   * while it runs, its result's once it has ended. */
  denials?: Denial[];
  denialsDropped?: number;
  [key: string]: unknown;
}

/** POST /v1/processes/logs. */
export interface ProcessLogs {
  id: string;
  content?: string;
  contentBase64?: string;
  /** The log's bytes, whichever way they came. */
  bytes: Uint8Array;
  length: number;
  /** The log held more than these bytes (tailBytes, or the server's cap). */
  truncated?: boolean;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------
// What is sent

/** The command: argv, or command as `sh -c COMMAND`, exactly one. */
export type CommandSpec =
  | { argv: string[]; command?: undefined }
  | { command: string; argv?: undefined };

/** What a command may be given beyond the server's policy, within its
 * --grantable ceiling (else a 403 not_permitted). */
export interface GrantOptions {
  /** Network through hutch's egress proxy to these domains
   * ("example.com", "*.example.com", "*"); empty or absent: none. */
  allowedDomains?: string[];
  /** Registries of these package managers (node, python, rust, go, java,
   * ruby, php, dotnet, dart). */
  packageManagers?: string[];
  /** Permission tags: "@network", "domain:x", "package-manager:x",
   * "@host-network", "write:/path", "@git-write". */
  grant?: string[];
}

/** Ports of the command's sandbox reachable from the host. */
export interface PublishOptions {
  /** Each "[HOST_IP:]HOST_PORT:PORT[/tcp]" as `hutch run --publish` reads
   * it: HOST_PORT 0 picks a free port, which the answer reports (an
   * exec's first event, a process's record). Loopback host addresses
   * only. */
  publish?: string[];
}

export type ExecOptions = CommandSpec &
  GrantOptions &
  PublishOptions & {
    /** Each "ID:PORT", as `hutch run --reach` reads it: the command's
     * localhost:PORT leads to the durable process ID's published port
     * PORT; nothing else of the network opens. */
    reach?: string[];
    /** Relative to the workspace, or absolute inside it. */
    cwd?: string;
    env?: Record<string, string>;
    /** The command's stdin: text is sent in the request, bytes (a
     * Uint8Array, a Buffer) after it as they are (Hutch-Stdin: stream),
     * any byte value, past the server's 32 MiB cap on a request: up to
     * 64 KiB with the request, the rest once the command has started. */
    stdin?: string | Uint8Array;
    /** Stops the command after this many milliseconds (SIGTERM, then
     * SIGKILL after the server's --kill-after). */
    timeoutMs?: number;
    /** Appends to the command's stderr, after its own output, a few lines
     * naming what it was refused, by which rule, and how to allow each
     * ("hutch: refused ..."); the result's denials hold them either way. */
    explain?: boolean;
    /** Sees each chunk of output as it arrives, in order. A callback that
     * throws stops the command and rejects exec with its error. */
    onStdout?: (chunk: Uint8Array) => void;
    onStderr?: (chunk: Uint8Array) => void;
    /** Aborting hangs up, which stops the command. */
    signal?: AbortSignal;
  };

/** Omit over each member of a union, keeping it a union. */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

export type ExecStreamOptions = DistributiveOmit<ExecOptions, "onStdout" | "onStderr">;

export interface ReadOptions {
  path: string;
  offset?: number;
  limit?: number;
  /** "" (detect), "text" or "binary". */
  mode?: "" | "text" | "binary";
  noFollow?: boolean;
}

export interface WriteOptions {
  /** An absolute path the sandbox may write. */
  path: string;
  /** Text is sent as it is, bytes as base64. */
  content: string | Uint8Array;
  append?: boolean;
  /** The octal mode of a file the write creates: "644". */
  perm?: string;
  noFollow?: boolean;
}

export interface ExplainOptions {
  /** Absolute, or relative to the workspace. */
  path: string;
  /** "read" (the default), "write" or "execute". */
  access?: "read" | "write" | "execute";
}

export interface PathOptions {
  path: string;
}

export interface ListOptions {
  /** Default ".": the workspace. */
  path?: string;
}

export type ProcessStartOptions = CommandSpec &
  GrantOptions &
  PublishOptions & {
    name?: string;
    cwd?: string;
    env?: Record<string, string>;
    restart?: "always" | "on-failure" | "never";
    /** Append to the process's log, at the end of each run, a few lines
     * naming what it was refused ("hutch: refused ..."); the record's
     * runs hold them either way. */
    explain?: boolean;
  };

export interface ProcessIdOptions {
  id: string;
}

export interface ProcessLogsOptions {
  id: string;
  /** Only the log's last this many bytes. */
  tailBytes?: number;
}

/** A tool call to judge (POST /v1/approvals/decide). */
export interface DecideOptions {
  /** The tool called (bash, read_file...). */
  tool: string;
  /** Its argument: a shell tool's command line (judged command by
   * command), a file tool's path. */
  arg?: string;
  /** The calling agent (remembered grants are per agent). */
  agent?: string;
  /** The workspace the call acts in (remembered grants are per workspace). */
  workspace?: string;
}

export interface SandboxOptions {
  /** The socket `hutch serve --socket` listens on. */
  socketPath: string;
  /** Fails a request whose connection stays idle this long (no bytes
   * either way). Not a command's timeout (timeoutMs is): an exec of a
   * quiet command is idle too. Default: none. */
  idleTimeoutMs?: number;
}

// ---------------------------------------------------------------------------
// Wire names

const grantWire = { allowedDomains: "allowed_domains", packageManagers: "package_managers", grant: "grant" };

/** Every key of every member of T, each to a string: a table that
 * satisfies it names every option the type has (the compiler keeps the
 * run-time check and the types in step). */
type Table<T> = { [K in T extends unknown ? keyof T : never]-?: string };

/** Each request's options: the caller's name to the wire's ("" for an
 * option that stays in the client). */
const OPTIONS = {
  sandbox: { socketPath: "", idleTimeoutMs: "" } satisfies Table<SandboxOptions>,
  exec: {
    argv: "argv", command: "command", cwd: "cwd", env: "env", stdin: "stdin", timeoutMs: "timeout_ms",
    explain: "explain", ...grantWire, publish: "publish", reach: "reach", onStdout: "", onStderr: "", signal: "",
  } satisfies Table<ExecOptions>,
  read: { path: "path", offset: "offset", limit: "limit", mode: "mode", noFollow: "no_follow" } satisfies Table<ReadOptions>,
  write: { path: "path", content: "", append: "append", perm: "perm", noFollow: "no_follow" } satisfies Table<WriteOptions>,
  path: { path: "path" } satisfies Table<PathOptions> & Table<ListOptions>,
  explain: { path: "path", access: "access" } satisfies Table<ExplainOptions>,
  start: {
    argv: "argv", command: "command", name: "name", cwd: "cwd", env: "env", restart: "restart", ...grantWire,
    publish: "publish", explain: "explain",
  } satisfies Table<ProcessStartOptions>,
  id: { id: "id" } satisfies Table<ProcessIdOptions>,
  logs: { id: "id", tailBytes: "tail_bytes" } satisfies Table<ProcessLogsOptions>,
  decide: { tool: "tool", arg: "arg", agent: "agent", workspace: "workspace" } satisfies Table<DecideOptions>,
  none: {},
} satisfies Record<string, Record<string, string>>;

type OptionTable = Record<string, string>;

function camel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Keys whose values are the caller's data (variable names), not fields:
 * they keep their case. */
const DATA_KEYS = new Set(["env"]);

/** v with every object key camelCased, recursively. */
function camelize(v: unknown): unknown {
  if (Array.isArray(v)) {
    return v.map(camelize);
  }
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      out[camel(k)] = DATA_KEYS.has(k) ? x : camelize(x);
    }
    return out;
  }
  return v;
}

/** Refuses what is not an options object, and any key table lacks. */
function checkOptions(what: string, opts: unknown, table: OptionTable): Record<string, unknown> {
  if (opts === undefined) {
    return {};
  }
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new HutchOptionError("bad_option", "", `${what}: the options must be an object, not ${opts === null ? "null" : typeof opts}`);
  }
  const o = opts as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!Object.prototype.hasOwnProperty.call(table, k)) {
      const known = Object.keys(table);
      const hint = known.find((n) => n.toLowerCase() === camel(k).toLowerCase());
      throw new HutchOptionError(
        "unknown_option",
        k,
        `${what}: unknown option ${JSON.stringify(k)}` +
          (hint ? ` (did you mean ${hint}?)` : known.length ? ` (options: ${known.join(", ")})` : " (it takes none)"),
      );
    }
  }
  return o;
}

/** The wire body for opts: each option under its wire name, undefined
 * and null left out, the client's own options (wire name "") too. */
function wireBody(what: string, opts: unknown, table: OptionTable): Record<string, unknown> {
  const o = checkOptions(what, opts, table);
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    const wire = table[k];
    if (wire && v !== undefined && v !== null) {
      body[wire] = v;
    }
  }
  return body;
}

/** The caller's name for a field the server named. */
function optionName(table: OptionTable, wire: string | undefined): string | undefined {
  if (!wire) {
    return undefined;
  }
  if (wire === "content_base64" && "content" in table) {
    return "content";
  }
  for (const [k, w] of Object.entries(table)) {
    if (w === wire) {
      return k;
    }
  }
  return camel(wire);
}

function requireString(what: string, o: Record<string, unknown>, key: string): void {
  if (typeof o[key] !== "string" || o[key] === "") {
    throw new HutchOptionError("bad_option", key, `${what}: ${key} must be a non-empty string`);
  }
}

/** How much of a stdin given as bytes goes with the request, before the
 * server has answered: well within what a unix socket takes at once
 * (Linux: 208 KiB by default). */
const STDIN_AHEAD = 64 << 10;

function bytesOf(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, "base64"));
}

// ---------------------------------------------------------------------------
// The client

interface Call {
  method: "GET" | "POST";
  path: string;
  body?: Record<string, unknown>;
  /** Bytes sent after the body: an exec's stdin (Hutch-Stdin: stream). */
  stdin?: Uint8Array | undefined;
  table: OptionTable;
  signal?: AbortSignal | undefined;
}

/**
 * The sandbox a `hutch serve` process on socketPath runs commands in.
 * Each call is one connection; calls may run concurrently.
 */
export class Sandbox {
  readonly socketPath: string;
  readonly idleTimeoutMs: number | undefined;
  /** The durable processes (they outlive the server). */
  readonly processes: Processes;

  constructor(opts: SandboxOptions) {
    const o = checkOptions("Sandbox", opts, OPTIONS.sandbox);
    requireString("Sandbox", o, "socketPath");
    this.socketPath = opts.socketPath;
    this.idleTimeoutMs = opts.idleTimeoutMs;
    this.processes = new Processes(this);
  }

  /** Sends one request; resolves with the response once its status says
   * success, else rejects with the HutchError its body holds. */
  private open(call: Call): Promise<{ req: http.ClientRequest; res: http.IncomingMessage; failure: () => Error | undefined }> {
    let data = call.body === undefined ? undefined : Buffer.from(JSON.stringify(call.body));
    let length = data?.length ?? 0;
    // The stdin past STDIN_AHEAD, sent once the command runs.
    let rest: Uint8Array | undefined;
    if (data !== undefined && call.stdin !== undefined) {
      // The body is the request's JSON, then the command's stdin, its
      // bytes as they are (Hutch-Stdin: stream). The server reads the
      // stdin once the command runs, and closes the connection once it
      // has answered, read or not. A refusal comes before: had more than
      // the socket takes at once been sent, Node would fail the write on
      // the closed connection before reading the refusal, and say EPIPE.
      // So the JSON and the stdin's first STDIN_AHEAD bytes go at once
      // (all of a small stdin), the rest once the answer says the
      // command started.
      length += call.stdin.byteLength;
      data = Buffer.concat([data, call.stdin.subarray(0, STDIN_AHEAD)]);
      if (call.stdin.byteLength > STDIN_AHEAD) {
        rest = call.stdin.subarray(STDIN_AHEAD);
      }
    }
    return new Promise((resolve, reject) => {
      const headers: http.OutgoingHttpHeaders = { Accept: "application/json, application/x-ndjson" };
      if (call.stdin !== undefined) {
        headers["Hutch-Stdin"] = "stream";
      }
      if (data !== undefined) {
        headers["Content-Type"] = "application/json";
        headers["Content-Length"] = length;
      }
      const req = http.request({
        socketPath: this.socketPath,
        method: call.method,
        path: call.path,
        headers,
        agent: false, // one connection per call, closed after it
        ...(this.idleTimeoutMs !== undefined ? { timeout: this.idleTimeoutMs } : {}),
        ...(call.signal !== undefined ? { signal: call.signal } : {}),
      });
      // What cut the connection, when the client did: the response's
      // own error says only "aborted".
      let failure: Error | undefined;
      req.on("timeout", () => {
        failure = new HutchError(0, "timeout", `${call.path}: no bytes for ${this.idleTimeoutMs} ms (idleTimeoutMs)`);
        req.destroy(failure);
      });
      // Once the answer has come, an error of the request is the
      // response's to say (it ends early, or not at all): an error
      // writing the stdin's rest is the server closing the connection
      // after the command ended without reading it all. Its answer is
      // whole when it was read first; when not, the error says so.
      let answered = false;
      req.on("error", (e) => {
        if (!answered) {
          reject(e);
        } else if (rest !== undefined && failure === undefined) {
          failure = new HutchError(
            0,
            "truncated",
            `${call.path}: the server closed the connection as the command ended without reading all of its stdin, ` +
              `before its result was read (${(e as NodeJS.ErrnoException).code ?? e.message}): the command ran`,
          );
        }
      });
      req.on("response", (res) => {
        answered = true;
        const status = res.statusCode ?? 0;
        if (status < 400) {
          if (rest !== undefined) {
            // Written, never end()ed: Content-Length says where the body
            // ends, and end() would follow it with an empty write, which
            // fails (EPIPE) once the server has read the stdin, answered
            // and closed, and takes the answer's unread rest with it.
            req.write(rest);
          }
          resolve({ req, res, failure: () => failure });
          return;
        }
        readAll(res).then((raw) => {
          req.destroy();
          reject(errorOf(status, raw, call.table));
        }, reject);
      });
      if (rest === undefined) {
        req.end(data);
      } else {
        req.write(data as Buffer); // a stdin comes with a body
      }
    });
  }

  private async json(call: Call): Promise<Record<string, unknown>> {
    const { req, res, failure } = await this.open(call);
    try {
      let raw: Buffer;
      try {
        raw = await readAll(res);
      } catch (e) {
        throw failure() ?? e;
      }
      let v: unknown;
      try {
        v = JSON.parse(raw.toString("utf8"));
      } catch {
        throw new HutchError(res.statusCode ?? 0, "protocol", `${call.path}: the answer is not JSON: ${raw.toString("utf8").slice(0, 200)}`);
      }
      return camelize(v) as Record<string, unknown>;
    } finally {
      req.destroy();
    }
  }

  /** @internal The processes' door to the server. */
  _call(method: "GET" | "POST", path: string, what: string, opts: unknown, table: OptionTable): Promise<Record<string, unknown>> {
    const body = wireBody(what, opts, table);
    return this.json(method === "GET" ? { method, path, table } : { method, path, body, table });
  }

  /** GET /v1/health: {status, workspace, prewarmed}. */
  async health(): Promise<Health> {
    return (await this.json({ method: "GET", path: "/v1/health", table: OPTIONS.none })) as Health;
  }

  /** GET /v1/version: {protocol, hutchVersion}. */
  async version(): Promise<Version> {
    return (await this.json({ method: "GET", path: "/v1/version", table: OPTIONS.none })) as Version;
  }

  /**
   * Runs a command and yields its events as they come: with publish,
   * {type: "published", published} first; its output ({type:
   * "stdout"|"stderr", data}), then {type: "result", ...} last.
   * Leaving the loop early hangs up, which stops the command.
   */
  async *execStream(opts: ExecStreamOptions): AsyncGenerator<ExecEvent, void, undefined> {
    const table = OPTIONS.exec;
    const body = wireBody("exec", opts, table);
    const signal = (opts as { signal?: AbortSignal }).signal;
    let stdin: Uint8Array | undefined;
    if (body["stdin"] instanceof Uint8Array) {
      stdin = body["stdin"];
      delete body["stdin"];
    }
    const { req, res, failure } = await this.open({ method: "POST", path: "/v1/exec", body, stdin, table, signal });
    try {
      for await (const line of lines(res)) {
        if (line.length === 0) {
          continue;
        }
        let ev: Record<string, unknown>;
        try {
          ev = JSON.parse(line.toString("utf8")) as Record<string, unknown>;
        } catch {
          throw new HutchError(res.statusCode ?? 0, "protocol", `exec: an event is not JSON: ${line.toString("utf8").slice(0, 200)}`);
        }
        const type = ev["type"];
        if (type === "stdout" || type === "stderr") {
          const d = typeof ev["data"] === "string" ? ev["data"] : "";
          const data = ev["base64"] === true ? bytesOf(d) : new Uint8Array(Buffer.from(d, "utf8"));
          yield { type, data };
        } else if (type === "started" && Array.isArray(ev["published"]) && ev["published"].length > 0) {
          yield { type: "published", published: camelize(ev["published"]) as Published[] };
        } else if (type === "result") {
          const end: ExecEvent = {
            type: "result",
            exitCode: typeof ev["exit_status"] === "number" ? ev["exit_status"] : -1,
            result: camelize(ev["result"] ?? {}) as Result,
          };
          if (typeof ev["error"] === "string" && ev["error"] !== "") {
            end.error = ev["error"];
          }
          yield end;
          return;
        }
        // Another type is a later server's addition: skipped.
      }
      throw new HutchError(res.statusCode ?? 0, "truncated", "exec: the response ended before the result");
    } catch (e) {
      // An abort mid-stream surfaces as the response's premature end:
      // said as the abort it is.
      throw signal?.aborted ? abortError(signal) : (failure() ?? e);
    } finally {
      req.destroy();
    }
  }

  /**
   * Runs a command (argv, or command as `sh -c`) in the sandbox and
   * resolves with its ExecResult once it has ended; onStdout and onStderr
   * see the output as it arrives. A refusal before anything ran (a bad
   * field, a cwd outside the workspace, a grant beyond the ceiling)
   * rejects with a HutchError.
   */
  async exec(opts: ExecOptions): Promise<ExecResult> {
    checkOptions("exec", opts, OPTIONS.exec);
    const { onStdout, onStderr, ...rest } = opts;
    for (const [k, f] of [["onStdout", onStdout], ["onStderr", onStderr]] as const) {
      if (f !== undefined && typeof f !== "function") {
        throw new HutchOptionError("bad_option", k, `exec: ${k} must be a function`);
      }
    }
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    for await (const ev of this.execStream(rest as ExecStreamOptions)) {
      if (ev.type === "result") {
        const stdoutBytes = new Uint8Array(Buffer.concat(out));
        const stderrBytes = new Uint8Array(Buffer.concat(err));
        const r: ExecResult = {
          exitCode: ev.exitCode,
          stdout: Buffer.from(stdoutBytes).toString("utf8"),
          stderr: Buffer.from(stderrBytes).toString("utf8"),
          stdoutBytes,
          stderrBytes,
          result: ev.result,
          killed: ev.result.killed === true,
          killReason: typeof ev.result.killReason === "string" ? ev.result.killReason : "",
        };
        if (ev.error !== undefined) {
          r.error = ev.error;
        }
        return r;
      }
      if (ev.type === "published") {
        continue; // in the result's published too
      }
      if (ev.type === "stdout") {
        out.push(ev.data);
        onStdout?.(ev.data);
      } else {
        err.push(ev.data);
        onStderr?.(ev.data);
      }
    }
    throw new HutchError(0, "truncated", "exec: no result"); // execStream throws first
  }

  /** The file as a command of the sandbox would see it: content (text)
   * or contentBase64, bytes either way, and the file's info. */
  async read(opts: ReadOptions): Promise<ReadResult> {
    const table = OPTIONS.read;
    const body = wireBody("read", opts, table);
    const v = await this.json({ method: "POST", path: "/v1/files/read", body, table });
    return withBytes(v) as ReadResult;
  }

  /** Writes content (text, or bytes sent as base64) to the absolute path,
   * as a command of the sandbox could; resolves with the file's info. */
  async write(opts: WriteOptions): Promise<FileInfo> {
    const table = OPTIONS.write;
    const body = wireBody("write", opts, table);
    const content: unknown = opts.content;
    if (typeof content === "string") {
      body["content"] = content;
    } else if (content instanceof Uint8Array) {
      body["content_base64"] = Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString("base64");
    } else {
      throw new HutchOptionError("bad_option", "content", "write: content must be a string or a Uint8Array");
    }
    return (await this.json({ method: "POST", path: "/v1/files/write", body, table })) as FileInfo;
  }

  /** The file's info. */
  async stat(opts: PathOptions): Promise<FileInfo> {
    const table = OPTIONS.path;
    const body = wireBody("stat", opts, table);
    return (await this.json({ method: "POST", path: "/v1/files/stat", body, table })) as FileInfo;
  }

  /** POST /v1/explain: which rule of the sandbox's policy decides the
   * path for a read or a write, and how to allow it; nothing is run. */
  async explain(opts: ExplainOptions): Promise<Explanation> {
    const table = OPTIONS.explain;
    const body = wireBody("explain", opts, table);
    return (await this.json({ method: "POST", path: "/v1/explain", body, table })) as Explanation;
  }

  /** The directory's entries (default: the workspace). */
  async list(opts: ListOptions = {}): Promise<FileInfo[]> {
    const table = OPTIONS.path;
    const body = wireBody("list", opts, table);
    const v = await this.json({ method: "POST", path: "/v1/files/list", body, table });
    return (v["entries"] ?? []) as FileInfo[];
  }

  /** GET /v1/policy: the policy the server's commands run under (its
   * runtime.Policy as its flags and --policy file say it), its
   * --kill-after and its --grantable ceiling. */
  async policy(): Promise<ServerPolicy> {
    return (await this.json({ method: "GET", path: "/v1/policy", table: OPTIONS.none })) as ServerPolicy;
  }

  /** Re-reads the server's --policy file and flags: commands started
   * after it run under the new policy, those running keep theirs. A
   * policy that does not build rejects with a HutchError, and the old one
   * stays in effect. */
  async reload(): Promise<Reloaded> {
    return (await this.json({ method: "POST", path: "/v1/policy/reload", body: {}, table: OPTIONS.none })) as Reloaded;
  }

  /** POST /v1/approvals/decide: judges an agent's tool call as `hutch
   * grants decide` does, by the server's --rules and the remembered grants
   * of its --grants-db. A "prompt" is the caller's to put to the user.
   * Read-only: no call adds, revokes or lists grants (consent is the
   * user's to keep, not the agent's it judges). */
  async decide(opts: DecideOptions): Promise<Verdict> {
    const table = OPTIONS.decide;
    const body = wireBody("decide", opts, table);
    return (await this.json({ method: "POST", path: "/v1/approvals/decide", body, table })) as Verdict;
  }

  /** GET /v1/approvals/rules: the tools' rules in effect, sorted by tool,
   * as `hutch grants rules --json` prints them; a tool not listed is
   * prompted at high danger. */
  async approvalRules(): Promise<ApprovalRule[]> {
    const v = await this.json({ method: "GET", path: "/v1/approvals/rules", table: OPTIONS.none });
    return (v["rules"] ?? []) as ApprovalRule[];
  }
}

/**
 * The durable processes of a server: they outlive it, and a restarted
 * server lists and stops them.
 */
export class Processes {
  readonly #sb: Sandbox;

  constructor(sb: Sandbox) {
    this.#sb = sb;
  }

  /** Starts a process (argv, or command as `sh -c`); resolves with its record. */
  async start(opts: ProcessStartOptions): Promise<ProcessRecord> {
    return (await this.#sb._call("POST", "/v1/processes/start", "processes.start", opts, OPTIONS.start)) as ProcessRecord;
  }

  /** Every process's record. */
  async list(): Promise<ProcessRecord[]> {
    const v = await this.#sb._call("GET", "/v1/processes", "processes.list", undefined, OPTIONS.none);
    return (v["processes"] ?? []) as ProcessRecord[];
  }

  /** One process's record (a 404 not_found HutchError for an unknown id). */
  async get(opts: ProcessIdOptions): Promise<ProcessRecord> {
    checkId("processes.get", opts, OPTIONS.id);
    return (await this.#sb._call("POST", "/v1/processes/get", "processes.get", opts, OPTIONS.id)) as ProcessRecord;
  }

  /** Stops a process; resolves with its record once it is gone. */
  async stop(opts: ProcessIdOptions): Promise<ProcessRecord> {
    checkId("processes.stop", opts, OPTIONS.id);
    return (await this.#sb._call("POST", "/v1/processes/stop", "processes.stop", opts, OPTIONS.id)) as ProcessRecord;
  }

  /** Stops every process; resolves with their records. */
  async stopAll(): Promise<ProcessRecord[]> {
    const v = await this.#sb._call("POST", "/v1/processes/stop-all", "processes.stopAll", {}, OPTIONS.none);
    return (v["processes"] ?? []) as ProcessRecord[];
  }

  /** A process's log (its output): content or contentBase64, bytes either way. */
  async logs(opts: ProcessLogsOptions): Promise<ProcessLogs> {
    checkId("processes.logs", opts, OPTIONS.logs);
    const v = await this.#sb._call("POST", "/v1/processes/logs", "processes.logs", opts, OPTIONS.logs);
    return withBytes(v) as ProcessLogs;
  }

  /** Removes a stopped process's record and log (a 409 "active" while it runs). */
  async remove(opts: ProcessIdOptions): Promise<{ removed: string; [key: string]: unknown }> {
    checkId("processes.remove", opts, OPTIONS.id);
    return (await this.#sb._call("POST", "/v1/processes/remove", "processes.remove", opts, OPTIONS.id)) as { removed: string };
  }
}

function checkId(what: string, opts: unknown, table: OptionTable): void {
  requireString(what, checkOptions(what, opts, table), "id");
}

/** The error an aborted call rejects with: the signal's reason (an
 * AbortError DOMException for a plain abort()). */
function abortError(signal: AbortSignal): unknown {
  const reason: unknown = (signal as { reason?: unknown }).reason;
  if (reason !== undefined) {
    return reason;
  }
  const e = new Error("The operation was aborted");
  e.name = "AbortError";
  return e;
}

/** v with bytes: its content's or its contentBase64's. */
function withBytes(v: Record<string, unknown>): Record<string, unknown> {
  if (typeof v["contentBase64"] === "string") {
    v["bytes"] = bytesOf(v["contentBase64"]);
  } else {
    v["bytes"] = new Uint8Array(Buffer.from(typeof v["content"] === "string" ? v["content"] : "", "utf8"));
  }
  return v;
}

/** The HutchError an error response's body says. */
function errorOf(status: number, raw: Buffer, table: OptionTable): HutchError {
  const text = raw.toString("utf8");
  try {
    const e = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown; field?: unknown } }).error;
    if (e && typeof e === "object") {
      const wire = typeof e.field === "string" && e.field !== "" ? e.field : undefined;
      return new HutchError(status, String(e.code ?? ""), String(e.message ?? ""), optionName(table, wire), wire);
    }
  } catch {
    // not JSON: said as it came
  }
  return new HutchError(status, "http", text.trim() || `HTTP ${status}`);
}

async function readAll(res: http.IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of res) {
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts);
}

/** The response's lines, split on the byte \n (never inside a UTF-8
 * character), without it. */
async function* lines(res: http.IncomingMessage): AsyncGenerator<Buffer, void, undefined> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const chunk of res) {
    let buf = pending.length > 0 ? Buffer.concat([pending, chunk as Buffer]) : (chunk as Buffer);
    let nl: number;
    while ((nl = buf.indexOf(0x0a)) >= 0) {
      yield buf.subarray(0, nl);
      buf = buf.subarray(nl + 1);
    }
    pending = buf;
  }
  if (pending.length > 0) {
    yield pending;
  }
}
