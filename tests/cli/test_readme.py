"""The README is a front door: short, its two commands are the ones CI runs, and its tour works as
written in an empty folder: its suite and farm.toml are the ``farm init`` starter's, every ``farm``
command of it passes, and its Python snippets run. Every relative link of the README and of
docs/ names a file that exists."""

from __future__ import annotations

import json
import re
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.config import load_config
from farm.suite.loader import load_file

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
STARTER = ROOT / "farm" / "starter"


def blocks(kind: str, path: Path = README) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", path.read_text(encoding="utf-8"), re.DOTALL)


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readme_gives_the_test_command_that_ci_runs():
    (command,) = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert command in [line.strip() for block in blocks("bash") for line in block.splitlines()]


def test_the_readme_shows_the_ci_gate_with_adaptive_repeats():
    ci = README.read_text(encoding="utf-8").split("**8. In CI.**", 1)[1].split("**9.", 1)[0]
    assert "--runs auto --min-pass-rate 0.8" in ci and "--junit" in ci and "GITHUB_STEP_SUMMARY" in ci


def test_the_tour_shows_the_starter_suite_and_farm_toml_as_farm_init_writes_them():
    assert blocks("jsonl")[0] == (STARTER / "starter.jsonl").read_text(encoding="utf-8")
    assert blocks("toml")[0] == (STARTER / "farm.toml").read_text(encoding="utf-8")


def test_every_jsonl_block_loads_with_no_problem(tmp_path: Path):
    snippets = blocks("jsonl")
    assert snippets
    for i, text in enumerate(snippets):
        path = tmp_path / f"s{i}.jsonl"
        path.write_text(text)
        suite = load_file(path)
        assert suite.problems == [] and suite.cases


def test_every_toml_block_loads(tmp_path: Path):
    snippets = blocks("toml")
    assert snippets
    for i, text in enumerate(snippets):
        path = tmp_path / f"farm{i}.toml"
        path.write_text(text)
        assert load_config(path).agents


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return re.findall(r"\]\(([^)\s]+)\)", text)


DOCUMENTS = sorted([README, *(ROOT / "docs").rglob("*.md"), ROOT / "benchmarks" / "README.md", ROOT / "deploy" / "README.md"])


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_names_a_file_that_exists(document: Path):
    targets = [link.split("#", 1)[0] for link in _links(document) if not re.match(r"[a-z]+:|#", link)]
    assert [t for t in targets if not (document.parent / t).exists()] == []


#: The tour's command lines that cannot run here, and where they are tested instead.
ELSEWHERE = {
    "farm view": "a server that runs until Ctrl-C (tests/farm/view/test_server.py)",
}


def farm_commands() -> list[list[str]]:
    """Every ``farm`` command of the README's shell blocks, in order, as argument lists."""
    commands = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.strip()
            if command.startswith("farm ") and not any(skip in command for skip in ELSEWHERE):
                commands.append(shlex.split(command, comments=True)[1:])
    return commands


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that takes anything and counts what it was sent, per path."""

    received: dict[str, int]

    def do_POST(self):  # noqa: N802 (the standard library's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received[self.path] = self.received.get(self.path, 0) + 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.usefixtures("ray_session")
def test_the_tour_runs_as_written_in_an_empty_folder(tmp_path: Path, demo_server, monkeypatch):
    """Step by step: each command exits 0, the starter's cases pass, "your agent" of step 3 (the
    demo agent here, on 127.0.0.1) answers, traces reach a collector, the CI run writes its JUnit
    and step summary, and the Python snippets run on the runs the commands wrote."""
    import ray

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    yours = blocks("toml")[1].replace("http://127.0.0.1:8000", demo_server.url)
    received: dict[str, int] = {}
    collector = ThreadingHTTPServer(("127.0.0.1", 0), type("C", (Collector,), {"received": received}))
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    commands = farm_commands()
    assert commands[:3] == [["demo"], ["init"], ["test", "-i", "suites/starter.jsonl"]]
    runner = CliRunner()
    try:
        for args in commands:
            args = [arg.replace("http://127.0.0.1:4318", f"http://127.0.0.1:{collector.server_port}") for arg in args]
            with monkeypatch.context() as env:
                if "--address" in args:  # what --address auto finds: the session's Ray (RAY_ADDRESS), not another on this machine
                    env.setenv("RAY_ADDRESS", ray.get_runtime_context().gcs_address)
                if "--junit" in args:
                    env.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
                before = set(Path("farm-results").glob("*/results.jsonl"))
                result = runner.invoke(app, args, catch_exceptions=False)
            assert result.exit_code == 0, f"farm {shlex.join(args)}: {result.output}"
            if args == ["init"]:  # step 3: "add them to farm.toml"
                with open("farm.toml", "a", encoding="utf-8") as toml:
                    toml.write("\n" + yours)
            if args == ["test", "-i", "suites/starter.jsonl"]:
                (run,) = set(Path("farm-results").glob("*/results.jsonl")) - before
                statuses = {r["id"]: r["status"] for r in map(json.loads, run.read_text().splitlines())}
                assert statuses == {"greets": "passed", "prices-then-order": "passed", "buys-cheese": "passed"}
    finally:
        collector.shutdown()
    assert received.get("/v1/traces")
    assert Path("junit.xml").is_file() and (tmp_path / "step-summary.md").read_text().strip()
    for snippet in blocks("python"):
        scope: dict = {}
        exec(compile(snippet, "README.md", "exec"), scope)
        if "result" in scope:
            assert scope["result"].exit_code == 0
