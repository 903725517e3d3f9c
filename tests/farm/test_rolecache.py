"""The role cache: role calls answered from ``<results_dir>/.cache/roles`` instead of the role's
agent, against scripted role models behind a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import farm
from farm.agents.base import Reply
from farm.agents.python import PythonAgent
from farm.aio import run_sync
from farm.config import AgentConfig, load_config
from farm.demo.server import JSONServer, Response
from farm.roles.cache import CACHE_DIR, RoleCache, tally
from farm.roles.player import RolePlayer
from farm.roles.services import LocalRoles
from farm.roles.types import RoleRequest, Verdict
from tests.scripted import RoleModels, ScriptedAgent, farm_toml, roles_toml

CONVERSATION = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Your expense is submitted."}]
VERDICT = {"criteria": "submitted", "test_id": "c1"}


class Counting:
    """A handler that counts the requests it answers, then hands them on."""

    def __init__(self, handler):
        self.handler = handler
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, path, body, headers):
        with self._lock:
            self.requests += 1
        return self.handler(path, body, headers)


@pytest.fixture(scope="module")
def servers():
    models = RoleModels()
    target = Counting(ScriptedAgent())
    with JSONServer(models) as roles, JSONServer(target) as agent:
        yield agent, roles, models, target


@pytest.fixture
def project(tmp_path: Path, servers) -> Path:
    agent, roles, _, _ = servers
    extra = """
[agents.hot]
kind = "validator"
connector = "val"
temperature = 0.7

[agents.hot-cached]
kind = "validator"
connector = "val"
temperature = 0.7
cache = true
"""
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine="local") + roles_toml(roles.url) + extra)
    return tmp_path


def validate_twice(project: Path, agent_id: str, cache: bool = True) -> tuple[list[Verdict], int]:
    """Two identical validator calls through a fresh player each (as two runs make them);
    returns the verdicts and the cache hits."""
    cfg = load_config(project / "farm.toml")
    verdicts = []
    with tally() as calls:
        for _ in range(2):
            player = RolePlayer.from_config("validator", cfg, agent_id, cache=RoleCache.for_config(cfg) if cache else None)
            verdicts.append(player.run_once(lambda p: p.validate(CONVERSATION, dict(VERDICT))))
    assert calls.role_calls == 2
    return verdicts, calls.cache_hits


def test_a_role_call_made_twice_sends_one_request(project: Path, servers):
    models = servers[2]
    before = models.calls["val"]
    verdicts, hits = validate_twice(project, "val")
    assert models.calls["val"] - before == 1
    assert hits == 1
    assert verdicts[0] == verdicts[1] and verdicts[0].passed is True
    [entry] = (project / "results" / CACHE_DIR).rglob("*.json")
    assert entry.parent.name == entry.stem[:2]
    assert json.loads(entry.read_text())["reply"]["content"].startswith("My verdict:")


def test_without_the_cache_both_calls_are_sent(project: Path, servers):
    models = servers[2]
    before = models.calls["val"]
    _, hits = validate_twice(project, "val", cache=False)
    assert models.calls["val"] - before == 2 and hits == 0
    assert not (project / "results" / CACHE_DIR).exists()


def test_a_role_at_a_temperature_above_0_is_not_cached_unless_it_says_so(project: Path, servers):
    models = servers[2]
    before = models.calls["val"]
    _, hits = validate_twice(project, "hot")
    assert models.calls["val"] - before == 2 and hits == 0
    _, hits = validate_twice(project, "hot-cached")  # cache = true overrides the temperature
    assert models.calls["val"] - before == 3 and hits == 1


def test_volatile_values_stay_out_of_the_key(project: Path, servers):
    """A simulator's metadata carries the session id and turn counters; a rerun must still hit."""
    models = servers[2]
    cfg = load_config(project / "farm.toml")
    roles = LocalRoles(cfg, cache=RoleCache.for_config(cfg))
    meta = {"goal": "file an expense", "test_id": "c1", "max_turns": 4}
    before = models.calls["sim"]

    async def three():
        try:
            return (
                await roles.simulate(RoleRequest("sim", [], {**meta, "session_id": "s-1", "turn_number": 1, "turn_count": 0})),
                await roles.simulate(RoleRequest("sim", [], {**meta, "session_id": "s-2", "turn_number": 1, "turn_count": 0})),
                await roles.simulate(RoleRequest("sim", [], {**meta, "goal": "another goal", "session_id": "s-3"})),
            )
        finally:
            await roles.aclose()

    first, again, other = run_sync(three())
    assert first == again and other.input == first.input
    assert models.calls["sim"] - before == 2  # the changed goal is another request


def test_the_key_of_a_python_agent_is_its_entry_messages_and_stable_options(tmp_path: Path):
    cache = RoleCache(tmp_path)
    agent = PythonAgent(AgentConfig(id="judge", kind="python", entry="x:y"), fn=lambda m, o: "ok")
    key = cache.key(agent, CONVERSATION, {"session_id": "a", "metadata": {"session_id": "a", "turn_count": 2, "goal": "g"}}, role="validator")
    same = cache.key(agent, CONVERSATION, {"session_id": "b", "metadata": {"session_id": "b", "turn_count": 3, "goal": "g"}}, role="validator")
    assert key == same
    assert cache.key(agent, CONVERSATION, {"metadata": {"goal": "h"}}, role="validator") != key
    assert cache.key(agent, CONVERSATION[:1], {"metadata": {"goal": "g"}}, role="validator") != key
    assert cache.key(agent, CONVERSATION, {"metadata": {"goal": "g"}}, role="simulator") != key


def test_the_key_of_an_http_agent_leaves_out_its_session(tmp_path: Path):
    from farm.agents.http import HTTPAgent

    cache = RoleCache(tmp_path)
    config = AgentConfig(id="judge", kind="http", url="http://127.0.0.1:1/judge", session_header="X-Session")
    one, two = HTTPAgent(None, config), HTTPAgent(None, config)  # each makes a session id of its own
    options = {"metadata": {"session_id": "s-1", "criteria": "polite"}}
    assert cache.key(one, CONVERSATION, options) == cache.key(two, CONVERSATION, {"metadata": {"session_id": "s-2", "criteria": "polite"}})
    moved = HTTPAgent(None, config.model_copy(update={"url": "http://127.0.0.1:2/judge"}))
    assert cache.key(moved, CONVERSATION, options) != cache.key(one, CONVERSATION, options)


def test_two_writers_of_one_key_leave_a_whole_entry(tmp_path: Path):
    cache = RoleCache(tmp_path)
    key = "ab" + "0" * 62
    replies = [Reply(content=f"answer {i} " + "x" * 50_000) for i in range(2)]
    seen: list[Reply | None] = []

    def write(reply: Reply) -> None:
        for _ in range(40):
            cache.store(key, reply)
            seen.append(cache.load(key))

    threads = [threading.Thread(target=write, args=(r,)) for r in replies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is not None and r.content in (replies[0].content, replies[1].content) for r in seen)
    assert [p.name for p in cache.path(key).parent.iterdir()] == [f"{key}.json"]  # no temporary file left


def test_a_torn_entry_is_a_miss_and_is_written_again(project: Path, servers):
    models = servers[2]
    validate_twice(project, "val")
    [entry] = (project / "results" / CACHE_DIR).rglob("*.json")
    entry.write_text(entry.read_text()[:20])
    before = models.calls["val"]
    verdicts, hits = validate_twice(project, "val")
    assert models.calls["val"] - before == 1 and hits == 1 and verdicts[0].passed is True
    assert json.loads(entry.read_text())["version"] == 1


def test_a_key_the_role_echoes_is_not_stored(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ROLE_KEY", "sk-role-secret-0123456789")

    def echo(path, body, headers):
        from farm.demo.server import chat_completion

        auth = headers.get("Authorization") or headers.get("authorization") or ""
        return Response(chat_completion(json.dumps({"passed": True, "reason": f"seen {auth}"})))

    with JSONServer(echo) as server:
        (tmp_path / "farm.toml").write_text(
            f'[farm]\nresults_dir = "results"\n[connectors.j]\nbase_url = "{server.url}/v1"\nmodel = "j"\napi_key_env = "ROLE_KEY"\n'
            '[agents.judge]\nkind = "validator"\nconnector = "j"\n'
        )
        validate_twice(tmp_path, "judge")
    [entry] = (tmp_path / "results" / CACHE_DIR).rglob("*.json")
    assert "sk-role-secret" not in entry.read_text()


def test_the_agent_under_test_is_cached_only_when_it_says_so(project: Path, servers):
    target = servers[3]
    suite = project / "suite.jsonl"
    suite.write_text(json.dumps({"id": "hi", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]}) + "\n")

    def requests_of_two_runs() -> tuple[int, farm.RunResult]:
        before = target.requests
        for _ in range(2):
            result = farm.run(str(suite), config=project / "farm.toml", quiet=True)
            assert result.exit_code == 0
        return target.requests - before, result

    sent, _ = requests_of_two_runs()
    assert sent == 2
    toml = project / "farm.toml"
    toml.write_text(toml.read_text().replace('[agents.target]\nkind = "openai"\n', '[agents.target]\nkind = "openai"\ncache = true\n'))
    sent, last = requests_of_two_runs()
    assert sent == 1
    assert last.summary is not None and (last.summary.role_calls, last.summary.cache_hits) == (1, 1)
    assert json.loads((last.run_dir / "run.json").read_text())["role_cache"] == {"role_calls": 1, "cache_hits": 1}
    row = json.loads((last.run_dir / "results.jsonl").read_text())
    assert row["status"] == "passed" and row["cache_hits"] == 1


def test_who_decides_whether_a_role_is_cached():
    from farm.config import Connector
    from farm.roles.cache import caches_role

    judge = AgentConfig(id="judge", kind="validator", connector="c")
    conn = Connector(name="c", base_url="http://127.0.0.1:1/v1")
    assert caches_role(judge, judge, conn)  # temperature 0 (unset): cached
    hot = judge.model_copy(update={"params": {"temperature": 0.2}})
    assert not caches_role(hot, hot, conn)  # sampled on purpose
    assert not caches_role(judge, judge, conn.model_copy(update={"cache": False}))  # the connector opts out
    assert caches_role(hot, hot, conn.model_copy(update={"cache": True}))
    assert not caches_role(judge.model_copy(update={"cache": False}), judge, conn.model_copy(update={"cache": True}))  # the agent wins
    player = AgentConfig(id="llm", kind="openai", connector="c", temperature=0.9)
    assert not caches_role(judge.model_copy(update={"uses": "llm"}), player, conn)  # the player's temperature counts


class Other:
    """A client of a kind the cache knows nothing of."""

    async def send(self, messages, options):
        return Reply(content="ok")

    async def aclose(self):
        pass


def test_each_kind_of_agent_keeps_the_keys_earlier_runs_wrote(tmp_path: Path):
    """Keys computed before the agents gave their own key parts: a cache filled by an earlier
    run must still answer."""
    from farm.agents.http import HTTPAgent
    from farm.agents.openai import OpenAIAgent
    from farm.config import Connector

    connector = Connector(name="llm", base_url="http://127.0.0.1:1/v1", model="m-1")
    tools = [{"type": "function", "function": {"name": "f"}}]
    clients = {
        "openai": OpenAIAgent(connector, AgentConfig(id="judge", kind="openai", connector="llm", system_prompt="Judge.", temperature=0, max_tokens=50, params={"top_p": 1}, tools=tools)),
        "http": HTTPAgent(connector, AgentConfig(id="judge", kind="http", connector="llm")),
        "http with a template": HTTPAgent(
            None,
            AgentConfig(id="judge", kind="http", url="http://127.0.0.1:1/judge", method="PUT", request={"q": "{{input}}", "m": "{{model}}"}, session_header="X-Session"),
        ),
        "python": PythonAgent(AgentConfig(id="judge", kind="python", entry="x:y"), fn=lambda m, o: "ok"),
        "another kind": Other(),
    }
    options = {"session_id": "s-1", "user": "u-7", "metadata": {"session_id": "s-1", "turn_number": 2, "turn_count": 1, "goal": "g"}, "extra": 3}
    cache = RoleCache(tmp_path)
    keys = {name: cache.key(client, CONVERSATION, options, role="validator", agent_id="judge") for name, client in clients.items()}
    assert keys == {
        "openai": "db3fb35e48321eabd6158ec7d75484ea4d6c528b322c17bfef436e5f0b6875ca",
        "http": "57f1ce9770bd4d4e78690a3a6022e2c0e4ea24a19c5da631910f8b2fc38d4846",
        "http with a template": "77dcc09367eff7584b0cb60b0fb25a4df71417e2750070967dbcb3ef77260a8f",
        "python": "7dcec1f8ebf052668f481d781ce16e69461fd8078e45e0eca6cdfdab411f5f84",
        "another kind": "72ab6a01438ad19ea57ac4896c65f497581902e9f123276c35088ef61cdb2072",
    }


def test_a_verdict_that_is_neither_true_nor_false_is_never_kept(tmp_path: Path):
    from farm.demo.server import chat_completion
    from farm.errors import RoleError

    garbled = Counting(lambda path, body, headers: Response(chat_completion('{"passed": "maybe"}')))
    with JSONServer(garbled) as server:
        (tmp_path / "farm.toml").write_text(
            f'[farm]\nresults_dir = "results"\n\n[connectors.judge]\nbase_url = "{server.url}/v1"\nmodel = "m"\n\n'
            '[agents.weird]\nkind = "validator"\nconnector = "judge"\n'
        )
        cfg = load_config(tmp_path / "farm.toml")
        for _ in range(2):  # as two runs make them
            player = RolePlayer.from_config("validator", cfg, "weird", cache=RoleCache.for_config(cfg))
            with pytest.raises(RoleError, match="the validator gave no verdict: its 'passed' is \"maybe\", not true or false"):
                player.run_once(lambda p: p.validate(CONVERSATION, dict(VERDICT)))
    assert garbled.requests == 2  # asked again: the answer that was no verdict was not kept
    assert not list((tmp_path / "results" / CACHE_DIR).rglob("*.json"))
