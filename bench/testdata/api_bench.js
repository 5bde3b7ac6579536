// Times `true` run three ways from one Node process, interleaved round by
// round (see bench/api_test.go, BenchmarkAPIExec/node):
//
//   api    POST /v1/exec {"argv": ["true"]} to `hutch serve` with
//          http.request({socketPath}) through a keep-alive Agent (Node's
//          default agent keeps connections alive too), until the result
//          event;
//   bare   child_process.spawnSync("true");
//   bwrap  child_process.spawnSync(bwrap, [<the bench's agent policy>..., "true"]).
//
//     node api_bench.js CONFIG_JSON
//
// CONFIG_JSON: {"socket": path, "rounds": N, "warmup": W, "bwrap": [argv...]
// or null}. Prints one JSON object: {"client", "version", "rounds",
// "methods": {name: {"p50_ms", "p90_ms", "samples_ms"}}}. Standard library
// only.
'use strict';

const http = require('http');
const { spawnSync } = require('child_process');

const cfg = JSON.parse(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

// api runs argv through POST /v1/exec and resolves once the result event
// has come, rejecting unless the command exited 0.
function api(argv) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ argv });
    const req = http.request({
      socketPath: cfg.socket, path: '/v1/exec', method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { data += c; });
      res.on('end', () => {
        if (res.statusCode !== 200) {
          reject(new Error(`api: HTTP ${res.statusCode}: ${data}`));
          return;
        }
        const lines = data.split('\n').filter((l) => l !== '');
        const ev = JSON.parse(lines[lines.length - 1]);
        if (ev.type !== 'result' || ev.exit_status !== 0 || ev.error) {
          reject(new Error(`api: ${lines[lines.length - 1]}`));
          return;
        }
        resolve();
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

function spawned(file, args) {
  return () => {
    const r = spawnSync(file, args, { stdio: 'inherit' });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`${file}: exit ${r.status} signal ${r.signal}`);
  };
}

// order is the harness's (bench/harness_test.go): rotated by one each
// round, reversed every other n rounds.
function order(r, n) {
  const idx = [];
  for (let k = 0; k < n; k++) idx.push((r + k) % n);
  if (Math.floor(r / n) % 2 === 1) idx.reverse();
  return idx;
}

function quantile(samples, q) {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.floor(q * (s.length - 1))];
}

async function main() {
  const methods = [
    ['api', () => api(['true'])],
    ['bare', spawned('true', [])],
  ];
  if (cfg.bwrap) methods.push(['bwrap', spawned(cfg.bwrap[0], cfg.bwrap.slice(1))]);
  const samples = Object.fromEntries(methods.map(([name]) => [name, []]));
  for (let r = -(cfg.warmup || 0); r < cfg.rounds; r++) {
    for (const i of order(Math.max(r, 0), methods.length)) {
      const [name, run] = methods[i];
      const t = process.hrtime.bigint();
      await run();
      const d = Number(process.hrtime.bigint() - t) / 1e6;
      if (r >= 0) samples[name].push(d);
    }
  }
  agent.destroy();
  const out = { client: 'node', version: process.version, rounds: cfg.rounds, methods: {} };
  for (const [name, s] of Object.entries(samples)) {
    out.methods[name] = { p50_ms: quantile(s, 0.5), p90_ms: quantile(s, 0.9), samples_ms: s };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
