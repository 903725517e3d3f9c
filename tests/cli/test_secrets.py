"""A hostile agent that echoes its credentials, whole, cut and encoded: nothing the farm writes or prints holds them.

The real CLI, the session's Ray and a real server on 127.0.0.1. Every file
under the project (Parquet read back as rows), the console tree (-v) and the
NDJSON events (--json) are searched for every 12-character piece of every
secret.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion

pytestmark = pytest.mark.usefixtures("ray_session")

KEY_ENV = "FARM_HOSTILE_KEY"
KEY = "sk-hostile-7Qw9Zr2Lm4Xp8Tn6Vb3Kd5Hs1Jf0"
HEADER_SECRET = "hdr-secret-Aa1Bb2Cc3Dd4Ee5Ff6Gg7"
URL_PASSWORD = "urlpass-Hh8Ii9Jj0Kk1Ll2"
URL_QUERY_KEY = "qkey-Mm3Nn4Oo5Pp6Qq7Rr8"
SECRETS = [KEY, HEADER_SECRET, URL_PASSWORD, URL_QUERY_KEY]


def leaks(secret: str) -> str:
    """Everything a hostile server can do with a secret in one reply."""
    b64 = base64.b64encode(secret.encode()).decode()
    return " | ".join(
        [
            f"your key is {secret}",
            f"first half {secret[:13]} second half {secret[13:]}",
            f"base64 {b64} urlsafe {base64.urlsafe_b64encode(secret.encode()).decode()}",
            f"basic {base64.b64encode(('user:' + secret).encode()).decode()}",
            f"bearer {base64.b64encode(('Bearer ' + secret).encode()).decode()}",
            f"percent {quote(secret + '/=+', safe='')}",
        ]
    )


def hostile(path: str, body, headers: dict[str, str]) -> Response:
    received = json.dumps({"path": path, "headers": headers})  # whatever the farm sent, echoed
    text = (body or {}).get("messages", [{}])[-1].get("content") or ""
    everything = " || ".join(leaks(s) for s in SECRETS) + " || " + received
    if text == "error":
        return Response({"error": {"message": "x" * 176 + KEY + " " + everything}}, status=400)
    if text == "not a completion":
        return Response("plain text " + KEY + " " + everything)
    if text == "tool":
        return Response(chat_completion("", tool_calls=[{"name": "lookup", "arguments": {"key": KEY, "echo": everything}}]))
    return Response(chat_completion(everything))


@pytest.fixture(scope="module")
def server():
    with JSONServer(hostile) as s:
        yield s


def pieces(secret: str, n: int = 12) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


FORBIDDEN = set().union(*(pieces(s) for s in SECRETS))


def assert_clean(text: str, where: str) -> None:
    found = sorted(p for p in FORBIDDEN if p in text)
    assert not found, f"{where} holds a piece of a secret: {found[:3]}"


def everything_written(folder: Path) -> dict[str, str]:
    texts = {}
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            texts[str(path)] = json.dumps(pq.read_table(path).to_pylist(), default=str)
        else:
            texts[str(path)] = path.read_bytes().decode("utf-8", "replace")
    return texts


def hostile_toml(server: JSONServer, farm_extra: str = "") -> str:
    """A farm.toml whose agent under test talks to ``server`` with a secret in every place a connector holds one."""
    host = server.url.removeprefix("http://")
    return f"""
[farm]
default_agent = "target"
results_dir = "results"
{farm_extra}
[connectors.hostile]
base_url = "http://user:{URL_PASSWORD}@{host}/v1?api_key={URL_QUERY_KEY}"
api_key_env = "{KEY_ENV}"
headers = {{ "X-Api-Key" = "{HEADER_SECRET}" }}
max_retries = 0

[agents.target]
kind = "openai"
connector = "hostile"
"""


def test_no_output_holds_any_piece_of_a_secret(tmp_path: Path, server: JSONServer, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    (tmp_path / "farm.toml").write_text(hostile_toml(server))
    cases = [
        {"id": "echo", "input": "hello", "assertions": [{"type": "contains", "value": "pirate"}]},
        {"id": "echo-pass", "input": "hello", "assertions": [{"type": "contains", "value": "your key"}]},
        {"id": "tool", "input": "tool", "assertions": [{"type": "tool_called", "name": "nothing"}]},
        {"id": "error", "input": "error"},
        {"id": "broken", "input": "not a completion"},
    ]
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    config = str(tmp_path / "farm.toml")
    runner = CliRunner()

    verbose = runner.invoke(
        app,
        ["test", "-i", str(suite), "--config", config, "-v", "--junit", str(tmp_path / "junit.xml"), "--html", str(tmp_path / "report.html")],
        catch_exceptions=False,
    )
    assert verbose.exit_code == 1, verbose.output
    events = runner.invoke(app, ["test", "-i", str(suite), "--config", config, "--json"], catch_exceptions=False)
    assert events.exit_code == 1, events.output
    listing = runner.invoke(app, ["agents", "--config", config], catch_exceptions=False)
    assert listing.exit_code == 0, listing.output

    # the run really carried the secrets: the echo came back, masked
    rows = [json.loads(line) for line in next((tmp_path / "results").rglob("results.jsonl")).read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    assert by_id["echo-pass"]["status"] == "passed", by_id["echo-pass"]["error"]
    assert "your key is ***" in by_id["echo-pass"]["turns"][0]["output"]
    assert by_id["error"]["status"] == "error" and "400" in by_id["error"]["error"]
    assert by_id["broken"]["status"] == "error"

    assert_clean(verbose.output, "the -v console")
    assert_clean(events.output, "the --json events")
    assert_clean(listing.output, "farm agents")
    assert "***" in listing.output
    files = everything_written(tmp_path / "results")
    files.update(everything_written(tmp_path))
    assert any(name.endswith("cases.parquet") or ".parquet" in name for name in files)
    assert any(name.endswith("run.json") for name in files)
    for name, text in files.items():
        if name.endswith(("farm.toml", "suite.jsonl")):
            continue  # the user's own files
        assert_clean(text, name)


def echoing_generator(path: str, body, headers: dict[str, str]) -> Response:
    """A generator that writes the key it was sent (and every other secret) into its cases:
    ids, inputs, tags, an id taken twice (a rename) and a malformed case (a dropped line)."""
    sent = headers.get("Authorization", "").removeprefix("Bearer ") or KEY  # on Ray a role pool's own environment may lack it
    everything = " || ".join(leaks(s) for s in SECRETS)
    cases = [
        {"id": f"bad-{sent}", "input": "x", "assertions": [{"type": f"contians-{sent}", "value": HEADER_SECRET}]},
        {"id": f"echo-{sent}", "input": f"hello {everything}", "tags": [sent, f"tag-{URL_QUERY_KEY}"], "assertions": [{"type": "contains", "value": "key"}]},
        {"id": f"echo-{sent}", "input": f"hello again {sent}", "assertions": [{"type": "contains", "value": "key"}]},
    ]
    return Response(chat_completion(json.dumps({"cases": cases})))


def test_generated_cases_and_a_reporters_words_are_scrubbed_everywhere(tmp_path: Path, server: JSONServer, monkeypatch, engine: str):
    monkeypatch.setenv(KEY_ENV, KEY)
    generator = JSONServer(echoing_generator).start()
    (tmp_path / "farm.toml").write_text(
        hostile_toml(server, f'engine = "{engine}"\n')
        + f"""
[connectors.gen]
base_url = "{generator.url}/v1"
api_key_env = "{KEY_ENV}"

[agents.gen]
kind = "generator"
connector = "gen"

[agents.writer]
kind = "reporter"
connector = "hostile"
"""
    )
    config = str(tmp_path / "farm.toml")
    runner = CliRunner()
    try:
        run = runner.invoke(app, ["test", "-i", "agents:gen?count=2&patience=1", "--config", config, "-v", "-r", "writer", "--no-cache"], catch_exceptions=False)
        dry = runner.invoke(
            app, ["test", "-i", "agents:gen?count=2&patience=1", "--config", config, "--dry-run", "-o", str(tmp_path / "dry.jsonl"), "--no-cache"],
            catch_exceptions=False,
        )
    finally:
        generator.stop()
    assert run.exit_code in (0, 1), run.output
    assert dry.exit_code == 0, dry.output

    # the secrets really came back, and were masked where they landed
    (run_dir,) = [p.parent for p in (tmp_path / "results").glob("*/run.json")]
    generated = [json.loads(line) for line in (run_dir / "generated.jsonl").read_text().splitlines()]
    assert [c["id"] for c in generated] == ["echo-***", "echo-***-2"]
    assert "***" in generated[0]["tags"] and "hello your key is ***" in generated[0]["input"]
    stats = json.loads((run_dir / "run.json").read_text())["generation"]
    assert stats["renames"] and stats["problems"] and "***" in stats["problems"][0]
    assert "dropped:" in run.output and "dropped:" in dry.output
    report = (run_dir / "report.md").read_text()
    assert "your key is ***" in report

    assert_clean(run.output, "the -v console of a generated run")
    assert_clean(dry.output, "--dry-run's output")
    for name, text in everything_written(tmp_path).items():
        if name.endswith("farm.toml"):
            continue
        assert_clean(text, name)
    for secret in SECRETS:  # the encoded forms too, which the pieces above do not show
        encoded = [quote(secret, safe=""), base64.b64encode(secret.encode()).decode().rstrip("=")]
        for form in encoded:
            assert form not in report and form not in (tmp_path / "dry.jsonl").read_text()
