"""Command-line mistakes in options a new user makes: each is refused before any agent call, exit 2,
with one sentence of the farm's naming the option and the value (never a traceback, click's
``Usage:`` block or a silent no-op). A real agent on 127.0.0.1 shows that nothing was called."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from farm.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]

TOML = """[farm]
default_agent = "target"
results_dir = "results"
engine = "local"

[connectors.local]
base_url = "{url}/v1"

[agents.target]
connector = "local"
"""

MISTAKES = {
    # paths the run writes: a file where a folder goes, a folder where a file goes
    "--junit under a file": (["--junit", "shop.py/j.xml"], "--junit shop.py/j.xml: shop.py is a file, so no folder can be made there; give a path in a folder"),
    "--html under a file": (["--html", "shop.py/x.html"], "--html shop.py/x.html: shop.py is a file, so no folder can be made there; give a path in a folder"),
    "-o under a file": (["-o", "shop.py/r.jsonl"], "-o/--output shop.py/r.jsonl: shop.py is a file, so no folder can be made there; give a path in a folder"),
    "-o of a dry run under a file": (["--dry-run", "-o", "shop.py/r.jsonl"], "-o/--output shop.py/r.jsonl: shop.py is a file"),
    "--junit a folder": (["--junit", "suites"], "--junit suites: suites is a folder; give a file's path (e.g. suites/junit.xml)"),
    "--html a folder": (["--html", "suites"], "--html suites: suites is a folder; give a file's path (e.g. suites/report.html)"),
    "--update-golden a file": (["--update-golden", "shop.py"], "--update-golden shop.py: shop.py is a file; give a folder (made if missing)"),
    "--resume a file": (["--resume", "shop.py"], "--resume shop.py: shop.py is a file; --resume takes the run folder to continue (e.g. farm-results/<run_id>)"),
    # numbers, in the farm's words as --runs 0 and --alpha 1.5 are
    "--parallel -1": (["--parallel", "-1"], "--parallel -1: give a whole number of 1 or more"),
    "--parallel 0": (["--parallel", "0"], "--parallel 0: give a whole number of 1 or more"),
    "--parallel abc": (["--parallel", "abc"], "--parallel abc: give a whole number of 1 or more"),
    "--retries -2": (["--retries", "-2"], "--retries -2: give a whole number of 0 or more"),
    "--min-pass-rate abc": (["--min-pass-rate", "abc"], "--min-pass-rate: abc is not a share of tries between 0 (excluded) and 1, e.g. 0.8"),
    "--max-cost abc": (["--max-cost", "abc"], "--max-cost: abc is not a positive amount of USD"),
    "--alpha abc": (["--runs", "auto", "--min-pass-rate", "0.8", "--alpha", "abc"], "--alpha: abc is not between 0 and 0.5 (excluded), e.g. 0.05"),
    # options that would do nothing
    "--alpha without adaptive runs": (["--alpha", "0.1"], "--alpha 0.1: it tunes adaptive repeats, which this run does not make; give it with --runs auto or --runs MIN..MAX"),
    "--delta with a fixed --runs": (["--runs", "3", "--delta", "0.2"], "--delta 0.2: it tunes adaptive repeats, which this run does not make; give it with --runs auto or --runs MIN..MAX"),
    "--otlp-content without --otlp": (
        ["--otlp-content"],
        "--otlp-content: it puts the messages in the traces sent to an OTLP endpoint, and none is set; give --otlp URL (or set [farm].otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)",
    ),
}  # fmt: skip
"""Each mistake: the options after ``farm test -q -i suite.jsonl``, and the sentence said."""


@pytest.fixture(scope="module")
def server():
    with JSONServer(lambda path, body, headers: Response(chat_completion("fine"))) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "farm.toml").write_text(TOML.replace("{url}", server.url))
    (tmp_path / "suite.jsonl").write_text(
        json.dumps({"id": "hi", "input": "hi", "assertions": [{"type": "contains", "value": "fine"}]}) + "\n"
    )
    (tmp_path / "shop.py").write_text("def assistant(messages, options):\n    return 'hi'\n")
    (tmp_path / "suites").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    return tmp_path


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_mistaken_option_is_one_sentence_before_any_call(mistake: str, project: Path, server: JSONServer):
    args, said = MISTAKES[mistake]
    before = server.requests
    result = CliRunner().invoke(app, ["test", "-q", "-i", "suite.jsonl", *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {said}"), result.output
    assert len(result.output.strip().splitlines()) == 1 and "Usage:" not in result.output
    assert server.requests == before and not (project / "results").exists()


def test_the_options_the_mistakes_need_are_taken(project: Path, server: JSONServer):
    """What each refusal asks for works: --alpha with adaptive --runs, --otlp-content with --otlp, a file in a new folder."""
    for args in (
        ["--runs", "2..4", "--min-pass-rate", "0.5", "--alpha", "0.1", "--delta", "0.2", "--dry-run"],
        ["--otlp", "http://127.0.0.1:9", "--otlp-content", "--dry-run"],
        ["--parallel", "2", "--retries", "1", "--max-cost", "5", "--dry-run"],
    ):
        result = CliRunner().invoke(app, ["test", "-q", "-i", "suite.jsonl", *args], catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
    ran = CliRunner().invoke(app, ["test", "-q", "-i", "suite.jsonl", "--junit", "new/deep/junit.xml"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    assert (project / "new" / "deep" / "junit.xml").is_file()


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"parallel": 0}, "--parallel 0: give a whole number of 1 or more"),
        ({"retries": -1}, "--retries -1: give a whole number of 0 or more"),
        ({"alpha": 0.1}, "--alpha 0.1: it tunes adaptive repeats"),
        ({"otlp_content": True}, "--otlp-content: it puts the messages in the traces"),
        ({"update_golden": "shop.py"}, "--update-golden shop.py: shop.py is a file"),
    ],
)
def test_the_python_api_refuses_them_too(project: Path, server: JSONServer, keywords: dict, said: str):
    before = server.requests
    with pytest.raises(UsageError) as caught:
        farm.run("suite.jsonl", quiet=True, **keywords)
    assert str(caught.value).startswith(said)
    assert server.requests == before and not (project / "results").exists()


def test_a_resume_takes_its_own_inputs_and_no_other(project: Path, server: JSONServer):
    first = farm.run("suite.jsonl", quiet=True)
    assert first.exit_code == 0 and first.run_dir is not None
    (project / "other.jsonl").write_text(json.dumps({"id": "other", "input": "hello"}) + "\n")
    calls = server.requests
    refused = CliRunner().invoke(app, ["test", "-q", "--resume", str(first.run_dir), "-i", "other.jsonl"], catch_exceptions=False)
    assert refused.exit_code == 2
    assert refused.output.strip() == (
        f"error: -i other.jsonl: --resume {first.run_dir} continues a run of suite.jsonl; "
        "give no -i (or that input) to finish it, and start a new run for another suite"
    )
    again = CliRunner().invoke(
        app, ["test", "-q", "--resume", str(first.run_dir), "-i", str(project / "suite.jsonl")], catch_exceptions=False
    )
    assert again.exit_code == 0, again.output
    assert server.requests == calls  # the run was finished: its own suite by another path adds nothing
    assert json.loads((first.run_dir / "run.json").read_text())["inputs"] == ["suite.jsonl"]


@pytest.mark.parametrize(
    ("top", "said"),
    [
        ("abc", "error: --top abc: give a whole number of 0 or more; --top 0 shows all"),
        ("-3", "error: --top -3: give a whole number of 0 or more; --top 0 shows all"),
    ],
)
def test_report_top_is_a_whole_number(project: Path, top: str, said: str):
    result = CliRunner().invoke(app, ["report", "--top", top, str(project)], catch_exceptions=False)
    assert result.exit_code == 2 and result.output.strip() == said


def test_init_in_a_file_asks_for_a_folder(project: Path):
    result = CliRunner().invoke(app, ["init", "shop.py"], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.output.strip() == "error: farm init shop.py: shop.py is a file; give a folder (or none for this one)"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["suites"],
            "error: Cannot view suites, as there is no run folder in it; run `farm test` first or name a results folder.",
        ),
        (["--port", "abc", "suites"], "error: --port abc is not a port: give one from 1 to 65535, or 0 for a free one."),
    ],
)
def test_view_of_a_folder_that_holds_no_runs_is_refused(project: Path, args: list[str], said: str):
    (project / "suites" / "a.jsonl").write_text("{}\n")
    done = subprocess.run(
        [sys.executable, "-m", "farm.cli", "view", *args], cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip() == said and done.stdout == ""


@pytest.mark.parametrize("flags", [["--junit", "j.xml"], ["--html", "r.html"], ["--update-golden", "golden"], ["-r", "judge"]])
def test_a_dry_run_refuses_what_only_a_run_writes(tmp_path: Path, flags: list[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "--dry-run", *flags], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert f"{flags[0] if flags[0] != '-r' else '--reporter'}: --dry-run runs no case, so nothing comes of it; drop one of the two" in result.output
    assert not list(tmp_path.glob("j.xml")) and not (tmp_path / "golden").exists()
