"""The REST API under load: gunicorn on a scratch PostgreSQL database, 32 clients for 60 s.

Starts gunicorn (gthread, --workers 2 --threads 8 by default: one process per core, threads to overlap the
database round trips of a POST: five (the token, the project, the membership, BEGIN with the prompt bundle,
then the four INSERTs and COMMIT in one pipeline). A 10 s sweep of 4×4, 2×8, 2×16, 5×2 and 8×1 on 2 cores,
made when a POST took more round trips, gave the same throughput within noise, 2×8 the lowest POST p95) on
127.0.0.1 against a migrated scratch database `aiteam_bench_api_load` with CELERY_BROKER_URL on Redis database
12 and no worker (the intake only publishes the first step after commit; it never waits on a worker). Creates
org `bench`, admin `loader` and its token with `manage.py aiteam_user`, warms up for a few seconds, then runs
N concurrent clients (threads, one keep-alive httpx.Client each) for the duration: each POSTs
/api/v1/requirements/ {"brief": …} and then GETs /api/v1/requirements/{id}/ of what it created, alternately.
Prints p50/p95/p99 per endpoint, requests/s, error counts and the CPU each side used (the load generator
shares the machine's cores with the server).

Phases of --duration each. Paced (the latency target, POST p95 ≤ 50 ms), once per --pace-ms value: each
client starts a POST+GET pair every that many ms (default 2000 then 1000: 16 then 32 briefs/s, as many
reads), late pairs start at once; that gives latency against offered load. Closed loop (capacity): no pause
between requests; by Little's law the mean latency is then about clients / throughput, whatever the server does.

    .venv/bin/python bench/api_load.py [--duration 60] [--clients 32] [--pace-ms 2000,1000] [--workers 2] [--threads 8]
                                       [--conn-max-age SECONDS]   (diagnostic: persistent DB connections)
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._report import BENCH_BROKER, percentile, print_load_after, print_machine  # noqa: E402
from bench._services import ROOT, scratch_database  # noqa: E402

BRIEF = (ROOT / "agents/cassettes/sample_brief.md").read_text().partition("\n")[2].strip()
CLK = os.sysconf("SC_CLK_TCK")


def main() -> None:
    args = parse()
    began = time.monotonic()
    import redis

    broker = redis.Redis.from_url(BENCH_BROKER)
    with tempfile.TemporaryDirectory() as tmp, scratch_database("aiteam_bench_api_load", BENCH_BROKER) as url:
        env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": BENCH_BROKER, "AITEAM_LOG_LEVEL": "WARNING",
               "AITEAM_AUTONOMOUS": "false", "AITEAM_WORKSPACE_ROOT": f"{tmp}/ws"}
        env.pop("ANTHROPIC_API_KEY", None)
        if args.conn_max_age is not None:
            env.update(DJANGO_SETTINGS_MODULE="bench._settings_conn_max_age", BENCH_CONN_MAX_AGE=str(args.conn_max_age))
        else:
            env["DJANGO_SETTINGS_MODULE"] = "aiteam.settings"
        print_machine("Django", "djangorestframework", "gunicorn", "httpx", "celery", "psycopg",
                      database_url=url, broker_url=BENCH_BROKER)
        broker.flushdb()
        token = subprocess.run([sys.executable, "manage.py", "aiteam_user", "--org", "bench", "--username", "loader",
                                "--role", "admin"], cwd=ROOT, env=env, check=True, capture_output=True,
                               text=True).stdout.strip().splitlines()[-1]
        port = free_port()
        command = [str(Path(sys.executable).parent / "gunicorn"), "aiteam.wsgi", "--bind", f"127.0.0.1:{port}",
                   "--worker-class", "gthread", "--workers", str(args.workers), "--threads", str(args.threads),
                   "--backlog", "2048", "--keep-alive", "30", "--log-level", "warning"]
        print(f"server: {' '.join(['gunicorn', *command[1:]])}")
        print(f"        ({args.workers} processes × {args.threads} threads on {os.cpu_count()} cores; DB connections: "
              f"{'CONN_MAX_AGE=' + str(args.conn_max_age) if args.conn_max_age is not None else 'as configured'}; "
              f"AITEAM_LOG_LEVEL=WARNING, no access log)")
        log = (Path(tmp) / "gunicorn.log").open("w")
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_up(base, token, server, Path(tmp) / "gunicorn.log")
            load(base, token, args.clients, args.warmup, pace_s=0)  # warm every worker process and thread
            phases = [(f"paced: each client starts a POST+GET pair every {ms:g} ms", ms / 1000) for ms in args.pace_ms]
            for title, pace_s in [*phases, ("closed loop: no pause between requests", 0.0)]:
                cpu_before = cpu_snapshot(server.pid)
                results, wall = load(base, token, args.clients, args.duration, pace_s=pace_s)
                cpu_after = cpu_snapshot(server.pid)
                report(args, title, results, wall, cpu_before, cpu_after, target=pace_s > 0)
        finally:
            os.killpg(server.pid, 15)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, 9)
            log.close()
            queued = broker.llen("llm")
            broker.flushdb()
    print(f"messages left on the llm queue (first steps, no worker): {queued}")
    print(f"benchmark wall time: {time.monotonic() - began:.1f} s")
    print_load_after()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(base: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"gunicorn exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/api/v1/requirements/", headers=auth(token), timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    sys.exit(f"gunicorn did not answer within 30 s:\n{log.read_text()[-3000:]}")


def auth(token: str) -> dict:
    return {"Authorization": f"Token {token}"}


def load(base: str, token: str, clients: int, duration: float, *, pace_s: float) -> tuple[dict, float]:
    """`clients` threads alternate POST and GET until `duration` seconds have passed, a pair every `pace_s`
    seconds per client (0: back to back); returns samples by endpoint."""
    results: dict[str, list] = {"POST /requirements/": [], "GET /requirements/{id}/": []}
    lock = threading.Lock()
    start_line = threading.Barrier(clients + 1)
    deadline_box = {}

    def client(n: int) -> None:
        posts, gets = [], []
        with httpx.Client(base_url=base, headers=auth(token), timeout=30) as http:
            start_line.wait()
            deadline = deadline_box["t"]
            next_start = time.monotonic() + pace_s * n / clients  # spread the clients over one period
            i = 0
            while time.monotonic() < deadline:
                pause = next_start - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                next_start = max(next_start + pace_s, time.monotonic()) if pace_s else 0
                i += 1
                status, ms, body = timed(http, "POST", "/api/v1/requirements/",
                                         json={"brief": f"{BRIEF}\n\n(load client {n}, request {i})"})
                posts.append((status, ms))
                if status != 201 or time.monotonic() >= deadline:
                    continue
                status, ms, _ = timed(http, "GET", f"/api/v1/requirements/{body['id']}/")
                gets.append((status, ms))
        with lock:
            results["POST /requirements/"] += posts
            results["GET /requirements/{id}/"] += gets

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for t in threads:
        t.start()
    started = time.monotonic()
    deadline_box["t"] = started + duration
    start_line.wait()
    for t in threads:
        t.join(timeout=duration + 60)
    return results, time.monotonic() - started


def timed(http: httpx.Client, method: str, path: str, **kwargs) -> tuple[int, float, dict | None]:
    started = time.perf_counter()
    try:
        response = http.request(method, path, **kwargs)
        body = response.json() if response.status_code == 201 else None
        return response.status_code, (time.perf_counter() - started) * 1000, body
    except (httpx.HTTPError, ValueError) as exc:
        return -1 if not isinstance(exc, httpx.TimeoutException) else -2, (time.perf_counter() - started) * 1000, None


def proc_cpu(pid: int, children_too: bool = False) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children_too else 0)
    return ticks / CLK


def cpu_snapshot(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by this process, gunicorn (master + workers), PostgreSQL and Redis."""
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()
    snap = {"client (this process)": sum(os.times()[:2]),
            "gunicorn": proc_cpu(server_pid) + sum(proc_cpu(int(c)) for c in children), "postgres": 0.0, "redis": 0.0}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if comm == "postgres":  # the postmaster's children-time holds the backends that exited
            snap["postgres"] += proc_cpu(int(proc.name), children_too=True)
        elif comm.startswith("redis-server"):
            snap["redis"] += proc_cpu(int(proc.name))
    return snap


def report(args, title: str, results: dict, wall: float, before: dict, after: dict, *, target: bool) -> None:
    total = sum(len(v) for v in results.values())
    print(f"\n{title}")
    print(f"{args.clients} clients for {wall:.1f} s: {total} requests, {total / wall:.1f} requests/s")
    print(f"  {'endpoint':26} {'requests':>9} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} "
          f"{'errors':>7}")
    for name, samples in results.items():
        ok = [ms for status, ms in samples if 200 <= status < 300]
        errors = {}
        for status, _ in samples:
            if not 200 <= status < 300:
                label = {-1: "transport", -2: "timeout"}.get(status, str(status))
                errors[label] = errors.get(label, 0) + 1
        if not ok:
            print(f"  {name:26} {len(samples):9d}  no successful request; errors {errors}")
            continue
        print(f"  {name:26} {len(samples):9d} {len(samples) / wall:8.1f} {statistics.median(ok):8.1f} "
              f"{percentile(ok, 95):8.1f} {percentile(ok, 99):8.1f} {max(ok):8.1f} {sum(errors.values()):7d}"
              + (f"  {errors}" if errors else ""))
    post = [ms for status, ms in results["POST /requirements/"] if status == 201]
    if post and target:
        p95 = percentile(post, 95)
        print(f"target POST p95 ≤ 50 ms: {'met' if p95 <= 50 else 'NOT met'} ({p95:.1f} ms)")
    used = {k: after[k] - before[k] for k in before}
    print("CPU used in the measured window (cores busy on average): "
          + ", ".join(f"{k} {v / wall:.2f}" for k, v in used.items()) + f" (of {os.cpu_count()})")


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=3, help="seconds of unmeasured load first")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--pace-ms", type=lambda text: [float(v) for v in text.split(",")], default=[2000, 1000],
                        help="paced phases: ms between a client's pairs, comma-separated (one phase each)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker (gthread)")
    parser.add_argument("--conn-max-age", type=float, default=None,
                        help="diagnostic: run with persistent DB connections (CONN_MAX_AGE seconds)")
    return parser.parse_args()


if __name__ == "__main__":
    main()
