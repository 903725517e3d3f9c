"""What ``--otlp`` costs a run: ``farm test`` on N single-turn cases, with and without sending
each case run as a trace, in the same session, alternated.

    python benchmarks/otlp_export.py                     # 1000 cases, 3 pairs, the local engine
    python benchmarks/otlp_export.py --cases 1000 --repeat 5 --engine ray --json

Each run is a fresh ``farm test -i suite.jsonl`` process against the fake agent of
``fake_agent.py`` (its own process); the exported runs send to a small OTLP/HTTP collector in
a process of its own, which decodes every request with ``opentelemetry-proto`` and counts the
spans and log records it got. Reported: the wall time and the farm process's CPU of each, and
their ratios (exported / plain), the median over the pairs; and what reached the collector.
Each case asserts twice (two evaluation results per case run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import FakeAgent, config_toml  # noqa: E402  (beside this script)
from whole_command import run_farm  # noqa: E402

COLLECTOR = r'''
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

counts = {"spans": 0, "logs": 0, "requests": 0}
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/count":
            with lock:
                answer = ("%(spans)d %(logs)d %(requests)d" % counts).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(answer))); self.end_headers(); self.wfile.write(answer)
            return
        with lock:
            counts["requests"] += 1
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                counts["spans"] += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            else:
                request = ExportLogsServiceRequest.FromString(body)
                counts["logs"] += sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
'''


class Collector:
    """The OTLP/HTTP collector, in a child process until stopped."""

    def __enter__(self) -> Collector:
        self.process = subprocess.Popen([sys.executable, "-c", COLLECTOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"
        return self

    def counts(self) -> dict[str, int]:
        import urllib.request

        with urllib.request.urlopen(urllib.request.Request(f"{self.url}/count", data=b"", method="POST"), timeout=10) as reply:
            spans, logs, requests = map(int, reply.read().split())
        return {"spans": spans, "logs": logs, "requests": requests}

    def __exit__(self, *exc: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


def one(folder: Path, engine: str, parallel: int, otlp: str | None) -> dict[str, Any]:
    for old in (folder / "results").glob("*"):
        subprocess.run(["rm", "-rf", str(old)], check=True)
    extra = ["--otlp", otlp] if otlp else []
    import whole_command

    original = whole_command.subprocess.run

    def with_export(command: list[str], **kwargs: Any) -> Any:
        return original([*command, *extra], **kwargs)

    whole_command.subprocess.run = with_export  # type: ignore[assignment]
    try:
        return run_farm(folder, parallel, None, engine)
    finally:
        whole_command.subprocess.run = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", default="local")
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as temp, FakeAgent(args.latency) as agent, Collector() as collector:
        folder = Path(temp)
        (folder / "farm.toml").write_text(config_toml(agent.url))
        cases = ({"id": f"c{i}", "input": f"Hello {i}", "assertions": [{"type": "contains", "value": "fake"}, {"type": "not_contains", "value": "refused"}]} for i in range(args.cases))
        (folder / "suite.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
        for _ in range(args.repeat):
            plain = one(folder, args.engine, args.parallel, None)
            exported = one(folder, args.engine, args.parallel, collector.url)
            pairs.append((plain, exported))
            time.sleep(0.5)
        received = collector.counts()
    wall = statistics.median(e["wall_s"] / p["wall_s"] for p, e in pairs)
    cpu = statistics.median(e["cpu_s"] / p["cpu_s"] for p, e in pairs)
    report = {
        "cases": args.cases,
        "engine": args.engine,
        "pairs": [{"plain_wall_s": round(p["wall_s"], 3), "exported_wall_s": round(e["wall_s"], 3), "plain_cpu_s": round(p["cpu_s"], 3), "exported_cpu_s": round(e["cpu_s"], 3)} for p, e in pairs],
        "wall_ratio": round(wall, 3),
        "cpu_ratio": round(cpu, 3),
        "received": received,
        "expected_per_run": {"spans": 2 * args.cases, "logs": 2 * args.cases},
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"{args.cases} cases, {args.engine} engine, {args.repeat} pairs (plain, --otlp), alternated")
    for each in report["pairs"]:
        print(f"  plain {each['plain_wall_s']:.2f} s ({each['plain_cpu_s']:.2f} s CPU)   --otlp {each['exported_wall_s']:.2f} s ({each['exported_cpu_s']:.2f} s CPU)")
    print(f"wall time, --otlp / plain (median): {wall:.3f}x   CPU: {cpu:.3f}x")
    print(f"the collector got {received['spans']} spans and {received['logs']} log records in {received['requests']} requests "
          f"(expected {2 * args.cases * args.repeat} of each)")  # fmt: skip


if __name__ == "__main__":
    main()
