"""Cost: a connector's ``price``, what each turn, case and role call cost, and no cost without a price."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import farm
from farm.agents.openai import parse_usage
from farm.config import Connector, Price, load_config
from farm.demo.server import JSONServer, Response, chat_completion
from farm.errors import UsageError
from farm.results import CaseResult, Status, Usage, add_cost, format_usd
from farm.summary import Summary
from tests.scripted import RoleModels, roles_toml


def test_price_costs_prompt_cached_and_completion_tokens_per_million():
    price = Price(input=2.50, output=10.00, cached_input=1.25)
    # 600 uncached * 2.50 + 400 cached * 1.25 + 200 * 10.00 = 4000 micro-dollars.
    assert price.cost(Usage(prompt_tokens=1000, completion_tokens=200, total_tokens=1200, cached_tokens=400)) == pytest.approx(0.004)
    # Without cached_input, cached tokens cost as input: 1000 * 2.50 + 200 * 10.00 = 4500.
    assert Price(input=2.50, output=10.00).cost(Usage(prompt_tokens=1000, completion_tokens=200, cached_tokens=400)) == pytest.approx(0.0045)
    assert Price(input=0, output=0).cost(Usage(prompt_tokens=5)) == 0.0


def test_no_price_no_cost():
    assert Connector(base_url="http://x").cost(Usage(prompt_tokens=100, completion_tokens=100)) is None
    assert Connector(base_url="http://x", price={"input": 1, "output": 2}).cost(Usage(prompt_tokens=1_000_000)) == 1.0


def test_add_cost_keeps_unknown_apart_from_zero():
    assert add_cost(None, None) is None
    assert add_cost(None, 0.0) == 0.0
    assert add_cost(0.5, None) == 0.5
    assert add_cost(0.5, 0.25) == 0.75


@pytest.mark.parametrize(
    ("price", "said"),
    [
        ("{ input = -1, output = 2 }", "key 'input': must be at least 0.0, not -1"),
        ("{ input = 1, output = 2, cached = 0.5 }", "key 'cached': unknown key (did you mean 'cached_input'?)"),
        ("{ input = 1 }", "key 'output': required, and missing from [connectors.llm.price]"),
        ('{ input = "cheap", output = 2 }', "key 'input': must be a number, not 'cheap'"),
        ("{ input = inf, output = 2 }", "key 'input': inf is not a finite amount of USD"),
        ("{ input = 1, output = nan }", "key 'output': nan is not a finite amount of USD"),
        ("{ input = 1, output = 2, cached_input = -inf }", "key 'cached_input': -inf is not a finite amount of USD"),
    ],
)
def test_a_bad_price_is_one_sentence_naming_the_line_and_key(tmp_path: Path, price: str, said: str):
    path = tmp_path / "farm.toml"
    path.write_text(f'[connectors.llm]\nbase_url = "http://127.0.0.1:1/v1"\nprice = {price}\n')
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}:3: {said}"


def test_usage_reads_cached_prompt_tokens():
    usage = parse_usage({"prompt_tokens": 900, "completion_tokens": 10, "total_tokens": 910, "prompt_tokens_details": {"cached_tokens": 512}})
    assert (usage.prompt_tokens, usage.cached_tokens) == (900, 512)
    assert parse_usage({"input_tokens": 50, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 20}}).cached_tokens == 20
    assert parse_usage({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": None}}).cached_tokens == 0
    assert (Usage(cached_tokens=2) + Usage(cached_tokens=3)).cached_tokens == 5


def test_summary_adds_cost_per_agent_and_the_roles_apart():
    summary = Summary()
    summary.add(CaseResult(id="a", status=Status.PASSED, agent="v1", cost_usd=0.5, role_cost_usd=0.25))
    summary.add(CaseResult(id="b", status=Status.FAILED, agent="v1", cost_usd=0.25))
    summary.add(CaseResult(id="a", status=Status.PASSED, agent="v2"))
    assert summary.cost() == {"cost_usd": 0.75, "role_cost_usd": 0.25}
    assert summary.several_agents
    assert summary.agent_counts()["v1"] == {"total": 2, "passed": 1, "failed": 1, "skipped": 0, "error": 0, "timeout": 0, "pass_rate": 0.5, "cost_usd": 0.75}
    assert summary.agent_counts()["v2"]["cost_usd"] is None
    assert Summary().cost() == {"cost_usd": None, "role_cost_usd": None}


class PricedAgent:
    """An OpenAI-compatible agent whose every reply reports 1000 prompt tokens (400 cached) and 200 completion."""

    def __init__(self) -> None:
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        with self._lock:
            self.requests += 1
        reply = chat_completion("Your expense is filed.", usage=(1000, 200))
        reply["usage"]["prompt_tokens_details"] = {"cached_tokens": 400}
        return Response(reply)


@pytest.fixture(scope="module")
def servers():
    with JSONServer(PricedAgent()) as agent, JSONServer(RoleModels()) as roles:
        yield agent, roles


def project(folder: Path, agent_url: str, roles_url: str, agent_price: str | None, judge_price: str | None) -> Path:
    price = f"price = {agent_price}\n" if agent_price else ""
    toml = (
        f'[farm]\ndefault_agent = "target"\nresults_dir = "results"\n'
        f'[connectors.local]\nbase_url = "{agent_url}/v1"\nmodel = "m"\n{price}'
        f'[agents.target]\nkind = "openai"\nconnector = "local"\n\n' + roles_toml(roles_url)
    )
    if judge_price:
        toml = toml.replace('model = "val"\n', f'model = "val"\nprice = {judge_price}\n', 1)
    (folder / "farm.toml").write_text(toml)
    cases = [
        {"id": "judged", "turns": [{"input": "File it"}, {"input": "And again"}],
         "final_assertions": [{"type": "agent", "use": "agents:val", "value": "expense is filed"}]},
        {"id": "plain", "input": "File it", "assertions": [{"type": "contains", "value": "filed"}]},
    ]  # fmt: skip
    suite = folder / "suite.jsonl"
    suite.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return suite


def test_a_priced_run_records_cost_on_turns_cases_and_role_calls(tmp_path: Path, servers, engine: str):
    agent, roles = servers
    suite = project(tmp_path, agent.url, roles.url, "{ input = 2.50, output = 10.00, cached_input = 1.25 }", "{ input = 1.0, output = 2.0 }")
    result = farm.run(str(suite), config=tmp_path / "farm.toml", engine=engine, quiet=True)
    assert result.exit_code == 0, result
    lines = {r["id"]: r for r in map(json.loads, (result.run_dir / "results.jsonl").read_text().splitlines())}
    per_turn = (600 * 2.50 + 400 * 1.25 + 200 * 10.00) / 1e6  # 0.004
    judged, plain = lines["judged"], lines["plain"]
    assert [turn["cost_usd"] for turn in judged["turns"]] == pytest.approx([per_turn, per_turn])
    assert judged["cost_usd"] == pytest.approx(2 * per_turn) and plain["cost_usd"] == pytest.approx(per_turn)
    # the judge's one call: the scripted role model reports 10 prompt and 5 completion tokens
    assert judged["role_cost_usd"] == pytest.approx((10 * 1.0 + 5 * 2.0) / 1e6)
    assert plain["role_cost_usd"] is None  # no role call: nothing spent, and no price met
    assert judged["usage"]["cached_tokens"] == 800

    cases = {row["case_id"]: row for row in pq.read_table(result.run_dir / "cases.parquet").to_pylist()}
    assert cases["judged"]["cost_usd"] == pytest.approx(2 * per_turn)
    assert cases["judged"]["role_cost_usd"] == pytest.approx(2e-5)
    assert cases["judged"]["cached_tokens"] == 800 and cases["judged"]["agent"] == "target"
    turns = pq.read_table(result.run_dir / "turns.parquet").to_pylist()
    assert [row["cost_usd"] for row in turns] == pytest.approx([per_turn] * 3)
    assert {row["agent"] for row in turns} == {"target"}
    assert {row["agent"] for row in pq.read_table(result.run_dir / "assertions.parquet").to_pylist()} == {"target"}
    assert result.summary.cost() == pytest.approx({"cost_usd": 3 * per_turn, "role_cost_usd": 2e-5})


def test_without_a_price_nothing_has_a_cost(tmp_path: Path, servers):
    agent, roles = servers
    suite = project(tmp_path, agent.url, roles.url, None, None)
    result = farm.run(str(suite), config=tmp_path / "farm.toml", engine="local", quiet=True)
    assert result.exit_code == 0, result
    for line in (result.run_dir / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert record["cost_usd"] is None and record["role_cost_usd"] is None
        assert all(turn["cost_usd"] is None for turn in record["turns"])
    assert pq.read_table(result.run_dir / "cases.parquet", columns=["cost_usd"])["cost_usd"].null_count == 2
    assert result.summary.cost() == {"cost_usd": None, "role_cost_usd": None}


def test_a_judge_answer_from_the_cache_costs_nothing(tmp_path: Path, servers):
    agent, roles = servers
    suite = project(tmp_path, agent.url, roles.url, None, "{ input = 1.0, output = 2.0 }")
    first = farm.run(str(suite), config=tmp_path / "farm.toml", engine="local", quiet=True)
    again = farm.run(str(suite), config=tmp_path / "farm.toml", engine="local", quiet=True)
    assert first.summary.role_cost_usd == pytest.approx(2e-5)
    assert again.summary.cache_hits == 1 and again.summary.role_cost_usd == 0.0


@pytest.mark.parametrize("budget", [float("nan"), float("inf"), "[farm] nan", "[farm] inf"])
def test_a_budget_of_nan_or_inf_is_refused_before_anything_runs(tmp_path: Path, servers, budget: Any):
    agent, roles = servers
    suite = project(tmp_path, agent.url, roles.url, "{ input = 1.0, output = 1.0 }", None)
    options: dict[str, Any] = {"max_cost": budget}
    if isinstance(budget, str):
        toml = tmp_path / "farm.toml"
        toml.write_text(toml.read_text().replace("[farm]\n", f"[farm]\nmax_cost = {budget.split()[1]}\n", 1))
        options = {}
    with pytest.raises(UsageError) as caught:
        farm.run(str(suite), config=tmp_path / "farm.toml", engine="local", quiet=True, **options)
    assert ("is not a positive amount of USD" if options else "is not a finite amount of USD") in str(caught.value)
    assert not (tmp_path / "results").exists()  # nothing ran, no run folder


def test_a_budget_without_any_price_is_refused_before_anything_runs(tmp_path: Path, servers):
    agent, roles = servers
    suite = project(tmp_path, agent.url, roles.url, None, None)
    with pytest.raises(UsageError, match=r"^--max-cost \$0\.5: no connector in .* has a price, so no cost can be counted"):
        farm.run(str(suite), config=tmp_path / "farm.toml", engine="local", quiet=True, max_cost=0.5)
    assert not (tmp_path / "results").exists()
    toml = tmp_path / "farm.toml"
    toml.write_text(toml.read_text().replace("[farm]\n", "[farm]\nmax_cost = 0.5\n", 1))
    with pytest.raises(UsageError, match=r"^\[farm\]\.max_cost \$0\.5: .* or drop \[farm\]\.max_cost$"):  # named where it was set
        farm.run(str(suite), config=toml, engine="local", quiet=True)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "—"),
        (0.0, "$0.0000"),
        (0.000085, "$0.000085"),  # a case of a cheap model: four decimals would show $0.0001
        (0.00000012345, "$0.00000012"),
        (0.004, "$0.0040"),
        (0.0123, "$0.0123"),
        (12.3456, "$12.3456"),
        (1234.5, "$1,234.50"),
    ],
)
def test_costs_print_with_significant_digits(value: float | None, shown: str):
    assert format_usd(value) == shown
