"""Session actors kept between the runs of one driver process: the next run on the same
cluster takes them (no new process), prepared with its own config; a kept actor that died
meanwhile is replaced without a case spending an attempt; actors with declared resources
are never kept."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import ray
from farm.actors.driver import run_plan
from farm.actors.roles import RolePools
from farm.actors.session import UNPREPARED, SessionActor, SessionSetup, WarmActors

from farm.config import load_config
from farm.conversation.settings import RunSettings
from tests.actors.test_faults import plan_for


def echo(messages, options):
    return f"{os.getpid()} {messages[-1]['content']}"


def shout(messages, options):
    return f"{os.getpid()} {messages[-1]['content'].upper()}"


def config(tmp_path: Path, entry: str, resources: str = ""):
    folder = tmp_path / entry
    folder.mkdir(exist_ok=True)
    (folder / "farm.toml").write_text(f'[agents.target]\nkind = "python"\nentry = "tests.actors.test_warm:{entry}"\n{resources}')
    return load_config(folder / "farm.toml")


def run(cfg, n: int = 6, **kw) -> list:
    results: list = []
    run_plan(plan_for(cfg, [{"id": f"c{i}", "input": f"hello {i}"} for i in range(n)], parallel=4, **kw), results.append)
    assert sorted(r.id for r in results) == [f"c{i}" for i in range(n)]
    assert all(r.status == "passed" and r.attempt == 1 for r in results), [(r.id, r.status, r.error) for r in results]
    return results


def pids(results: list) -> set[int]:
    return {int(r.worker.rsplit(":", 1)[1]) for r in results}


def test_a_second_run_takes_the_session_actors_the_first_left_prepared_with_its_own_config(tmp_path, ray_session):
    first = run(config(tmp_path, "echo"))
    second = run(config(tmp_path, "shout"))
    assert pids(second) == pids(first)  # the same processes: none started
    assert all(r.turns[0].output.endswith(f"HELLO {r.id[1:]}") for r in second)  # the second run's agent
    assert all(r.turns[0].output.endswith(f"hello {r.id[1:]}") for r in first)


def test_a_kept_actor_that_died_since_is_replaced_and_no_case_spends_an_attempt(tmp_path, ray_session):
    cfg = config(tmp_path, "echo")
    (pid,) = pids(run(cfg, actors=1))
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    again = run(cfg, actors=1)  # run() checks: every case passed on its first attempt
    assert pid not in pids(again)


def test_actors_with_declared_resources_are_never_kept(tmp_path, ray_session):
    cfg = config(tmp_path, "echo", "resources = { num_cpus = 0.5 }\nconcurrency = 3\n")
    first = run(cfg)
    assert not pids(first) & pids(run(cfg))


def test_a_call_waits_for_the_preparation_sent_ahead_of_it(tmp_path, ray_session):
    cfg = config(tmp_path, "echo")
    plan = plan_for(cfg, [{"id": "c0", "input": "hello"}])
    actor = SessionActor.remote()
    try:
        early = actor.run.remote("some-run", plan.cases[0], 0, "target")  # Ray may start it before the preparation
        time.sleep(0.5)
        setup = SessionSetup("some-run", "session-0", cfg, {"target": RunSettings(agent_id="target", run_id="r")}, None, 2, RolePools())
        ray.get(actor.prepare.remote(setup))
        assert ray.get(early, timeout=10).status == "passed"
    finally:
        ray.kill(actor)


def test_an_actor_asked_for_a_run_it_was_not_prepared_for_answers_unprepared(tmp_path, ray_session):
    cfg = config(tmp_path, "echo")
    plan = plan_for(cfg, [{"id": "c0", "input": "hello"}])
    actor = SessionActor.remote(prepare_wait=0.2)
    try:
        assert ray.get(actor.run.remote("some-run", plan.cases[0], 0, "target")) == UNPREPARED
        setup = SessionSetup("some-run", "session-0", cfg, {"target": RunSettings(agent_id="target", run_id="r")}, None, 2, RolePools())
        ray.get(actor.prepare.remote(setup))
        assert ray.get(actor.run.remote("some-run", plan.cases[0], 0, "target")).status == "passed"
        assert ray.get(actor.run.remote("another-run", plan.cases[0], 0, "target")) == UNPREPARED
        ray.get(actor.retire.remote("some-run"))  # the run ended: its clients are closed
        assert ray.get(actor.run.remote("some-run", plan.cases[0], 0, "target")) == UNPREPARED
    finally:
        ray.kill(actor)


def test_a_kept_actor_idle_longer_than_the_limit_is_stopped(ray_session):
    kept = WarmActors()
    kept.IDLE_SECONDS = 0.3
    actor = SessionActor.remote()
    ray.get(actor.pid.remote())
    kept.keep(("key",), actor)
    assert len(kept) == 1
    deadline = time.monotonic() + 10
    while len(kept) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(kept) == 0 and kept.take(("key",)) is None
    # the timer lets go of the actor, then asks Ray to stop it: a call sent in between may still be answered
    deadline = time.monotonic() + 10
    while True:
        try:
            ray.get(actor.pid.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            break
        assert time.monotonic() < deadline, "the actor outlived its idle limit"
        time.sleep(0.1)


def test_a_kept_actor_runs_the_agent_as_its_file_now_is(tmp_path, ray_session):
    name = f"warm_agent_{uuid.uuid4().hex[:8]}"
    module = tmp_path / f"{name}.py"
    module.write_text("import os\ndef answer(messages, options):\n    return f'{os.getpid()} before'\n")
    (tmp_path / "farm.toml").write_text(f'[agents.target]\nkind = "python"\nentry = "{name}:answer"\n')
    cfg = load_config(tmp_path / "farm.toml")
    first = run(cfg, n=2)
    module.write_text("import os\ndef answer(messages, options):\n    return f'{os.getpid()} after the edit'\n")
    stat = module.stat()
    os.utime(module, (stat.st_atime, stat.st_mtime + 2))
    second = run(cfg, n=2)
    assert pids(second) == pids(first)  # the kept actor
    assert {r.turns[0].output.split(" ", 1)[1] for r in first} == {"before"}
    assert {r.turns[0].output.split(" ", 1)[1] for r in second} == {"after the edit"}


def test_a_second_run_takes_the_role_pool_actors_the_first_left(tmp_path, ray_session):
    from farm.demo.server import JSONServer
    from tests.scripted import RoleModels, ScriptedAgent, farm_toml, roles_toml

    def validators() -> set[str]:
        return {name for name in ray.util.list_named_actors() if name.startswith("farm-val-")}  # this worker's namespace

    judged = {"id": "judged", "input": "Hello", "assertions": [{"type": "agent", "use": "agents:val", "options": {"metadata": {"criteria": "expense"}}}]}
    with JSONServer(ScriptedAgent()) as agent, JSONServer(RoleModels()) as models:
        (tmp_path / "farm.toml").write_text(farm_toml(agent.url) + roles_toml(models.url))
        cfg = load_config(tmp_path / "farm.toml")

        def judge_once() -> None:
            results: list = []
            run_plan(plan_for(cfg, [judged]), results.append)
            assert [r.status for r in results] == ["passed"], [r.error for r in results]

        judge_once()
        after_first = validators()
        judge_once()
        assert after_first and validators() <= after_first  # the second run started no validator
