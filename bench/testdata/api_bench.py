"""Times `true` run three ways from one Python process, interleaved round
by round (see bench/api_test.go, BenchmarkAPIExec/python):

  api    POST /v1/exec {"argv": ["true"]} to `hutch serve` through
         the hutch_client package in clients/python (HTTP/1.1 over AF_UNIX,
         its connection kept between calls, as the client keeps it), until
         the result event;
  bare   subprocess.run(["true"]);
  bwrap  subprocess.run([bwrap, <the bench's agent policy>..., "true"]).

    python3 api_bench.py CONFIG_JSON

CONFIG_JSON: {"socket": path, "client_dir": the directory holding the hutch_client package,
"rounds": N, "warmup": W, "bwrap": [argv...] or null}. Prints one JSON
object: {"client", "version", "rounds", "methods": {name: {"p50_ms",
"p90_ms", "samples_ms"}}}. Standard library only.
"""

import json
import platform
import subprocess
import sys
import time


def order(r, n):
    """The harness's order (bench/harness_test.go): rotated by one each
    round, reversed every other n rounds."""
    idx = [(r + k) % n for k in range(n)]
    if (r // n) % 2 == 1:
        idx.reverse()
    return idx


def quantile(samples, q):
    s = sorted(samples)
    return s[int(q * (len(s) - 1))]


def main():
    cfg = json.loads(sys.argv[1])
    sys.path.insert(0, cfg["client_dir"])
    from hutch_client import Sandbox

    sb = Sandbox(cfg["socket"], timeout=60)

    def api():
        r = sb.exec(argv=["true"])
        if r.exit_code != 0 or r.error:
            raise RuntimeError(f"api: exit {r.exit_code}, error {r.error!r}")

    def bare():
        subprocess.run(["true"], check=True)

    methods = [("api", api), ("bare", bare)]
    if cfg.get("bwrap"):
        argv = list(cfg["bwrap"])
        methods.append(("bwrap", lambda: subprocess.run(argv, check=True)))

    samples = {name: [] for name, _ in methods}
    for r in range(-cfg.get("warmup", 0), cfg["rounds"]):
        for i in order(max(r, 0), len(methods)):
            name, run = methods[i]
            t = time.perf_counter_ns()
            run()
            d = time.perf_counter_ns() - t
            if r >= 0:
                samples[name].append(d / 1e6)

    out = {"client": "python", "version": platform.python_version(), "rounds": cfg["rounds"], "methods": {}}
    for name, s in samples.items():
        out["methods"][name] = {"p50_ms": quantile(s, 0.5), "p90_ms": quantile(s, 0.9), "samples_ms": s}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
