"""Placement of session actors (actors/placement.py) decided on fake node lists, without Ray."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from farm.actors.placement import PLAIN_CPU, Node, SessionSpec, Unplaceable, plan_session_actors, wait_until_placeable

from farm.config import AgentConfig, Resources

HEAD = Node("head", {"memory": 8 * 2**30})  # a head started with num_cpus=0
ONE_CPU = [Node(f"w{i}", {"CPU": 1, "memory": 4 * 2**30}) for i in range(2)]


def agent(name: str = "heavy", concurrency: int | None = None, **resources: object) -> AgentConfig:
    return AgentConfig(id=name, kind="python", entry="m:f", concurrency=concurrency, resources=Resources(**resources) if resources else None)


def nodes_of(specs: list[SessionSpec]) -> Counter[str | None]:
    return Counter(spec.node_id for spec in specs)


def test_a_cpu_bound_agent_gets_one_actor_per_cpu_each_on_its_own_node():
    specs = plan_session_actors([agent(num_cpus=1)], parallel=128, nodes=[HEAD, *ONE_CPU], conversations={"heavy": 600})
    assert nodes_of(specs) == {"w0": 1, "w1": 1}
    assert all(s.options == {"num_cpus": 1} and s.concurrency == 1 and s.agents == ("heavy",) for s in specs)


def test_declared_actors_are_no_more_than_the_conversations_or_parallel_need():
    big = [Node(f"n{i}", {"CPU": 16}) for i in range(4)]
    assert len(plan_session_actors([agent(num_cpus=1)], 128, big, {"heavy": 3})) == 3
    assert len(plan_session_actors([agent(num_cpus=1)], 5, big, {"heavy": 600})) == 5
    two_each = plan_session_actors([agent(num_cpus=1, concurrency=4)], 12, big, {"heavy": 600})
    assert len(two_each) == 3 and {s.concurrency for s in two_each} == {4}
    assert len(nodes_of(two_each)) == 3, "spread over the nodes"


def test_a_gpu_agent_runs_only_where_the_gpu_is():
    cluster = [HEAD, Node("cpu", {"CPU": 1}), Node("gpu", {"CPU": 1, "GPU": 1})]
    assert nodes_of(plan_session_actors([agent(num_gpus=1)], 64, cluster, {"heavy": 50})) == {"gpu": 1}
    halves = plan_session_actors([agent(num_gpus=0.5)], 64, cluster, {"heavy": 50})
    assert nodes_of(halves) == {"gpu": 2} and all(s.options == {"num_gpus": 0.5} for s in halves)


def test_custom_resources_and_memory_are_packed_by_what_each_node_has():
    cluster = [Node("a", {"CPU": 8, "A100": 2, "memory": 16 * 2**30}), Node("b", {"CPU": 8, "memory": 64 * 2**30})]
    specs = plan_session_actors([agent(num_cpus=1, custom={"A100": 1})], 64, cluster, {"heavy": 50})
    assert nodes_of(specs) == {"a": 2} and specs[0].options == {"num_cpus": 1, "resources": {"A100": 1}}
    mem = plan_session_actors([agent(num_cpus=1, memory="10GiB")], 64, cluster, {"heavy": 50})
    assert nodes_of(mem) == {"a": 1, "b": 6}


def test_an_impossible_request_is_one_sentence_naming_the_agent_and_what_it_asks():
    with pytest.raises(Unplaceable) as err:
        plan_session_actors([agent(num_gpus=1)], 64, [HEAD, *ONE_CPU], {"heavy": 5})
    message = str(err.value)
    assert message.startswith('agent "heavy" asks for num_gpus = 1 per conversation slot') and "no node" in message
    assert "\n" not in message


def test_what_is_busy_now_limits_the_actors_but_one_is_always_planned():
    busy = [Node("w0", {"CPU": 4}, {"CPU": 1}), Node("w1", {"CPU": 4}, {"CPU": 0})]
    assert nodes_of(plan_session_actors([agent(num_cpus=1)], 64, busy, {"heavy": 50})) == {"w0": 1}
    plain_left = [Node("w0", {"CPU": 2}, {"CPU": 2 - 3 * PLAIN_CPU})]  # plain actors of a run that is ending
    assert len(plan_session_actors([agent(num_cpus=1)], 64, plain_left, {"heavy": 50})) == 2
    full = [Node("w0", {"CPU": 4}, {"CPU": 0})]
    assert len(plan_session_actors([agent(num_cpus=1)], 64, full, {"heavy": 50})) == 1


def test_two_declared_agents_share_the_cluster_and_each_actor_serves_only_its_agent():
    specs = plan_session_actors([agent("a", num_cpus=1), agent("b", num_cpus=1)], 64, [HEAD, *ONE_CPU], {"a": 10, "b": 10})
    assert sorted(s.agents for s in specs) == [("a",), ("b",)]
    assert len(nodes_of(specs)) == 2


def test_plain_actors_serve_every_agent_without_resources_and_declared_ones_only_theirs():
    http = AgentConfig(id="http", kind="openai")
    other = AgentConfig(id="other", kind="openai")
    specs = plan_session_actors([http, agent(num_cpus=1), other], 64, [HEAD, *ONE_CPU], {"http": 10, "heavy": 10, "other": 10})
    plain = [s for s in specs if not s.declared]
    assert plain and all(s.agents == ("http", "other") and s.options == {"num_cpus": PLAIN_CPU} for s in plain)
    assert all(s.agents == ("heavy",) for s in specs if s.declared)


def test_plain_actors_follow_the_clusters_cpus_and_parallel_spread_over_nodes_not_the_head():
    big = [HEAD, *(Node(f"n{i}", {"CPU": 16}) for i in range(4))]  # 64 CPUs
    at64 = plan_session_actors([AgentConfig(id="x")], 64, big, {"x": 1000})
    assert len(at64) == 8 and nodes_of(at64) == {"n0": 2, "n1": 2, "n2": 2, "n3": 2}
    assert sum(s.concurrency for s in at64) == 64
    assert len({s.node_id for s in at64[:4]}) == 4, "the first actors are on different nodes"
    at1000 = plan_session_actors([AgentConfig(id="x")], 1000, big, {"x": 10_000})
    assert len(at1000) == 64
    laptop = [Node("local", {"CPU": 2})]
    assert len(plan_session_actors([AgentConfig(id="x")], 128, laptop, {"x": 1000})) == 2
    assert len(plan_session_actors([AgentConfig(id="x")], 1, laptop, {"x": 1000})) == 1
    assert len(plan_session_actors([AgentConfig(id="x")], 64, big, {"x": 1000}, actors=3)) == 3
    uneven = plan_session_actors([AgentConfig(id="x")], 64, [Node("big", {"CPU": 6}), Node("small", {"CPU": 2})], {"x": 1000})
    assert nodes_of(uneven) == {"big": 6, "small": 2}


def test_memory_or_custom_only_shares_parallel_as_plain_actors_do():
    cluster = [Node("a", {"CPU": 2, "memory": 64 * 2**30}), Node("b", {"CPU": 2, "memory": 64 * 2**30})]
    specs = plan_session_actors([agent(memory="4GiB")], 64, cluster, {"heavy": 1000})
    assert len(specs) == 4 and sum(s.concurrency for s in specs) == 64
    assert all(s.options == {"memory": 4 * 2**30} for s in specs)


def test_without_an_autoscaler_an_impossible_request_is_refused_at_once():
    asked = []
    with pytest.raises(Unplaceable):
        wait_until_placeable([agent(num_gpus=1)], 300, say=asked.append, nodes=lambda: ONE_CPU, autoscaling=lambda: False)
    assert asked == []


def test_an_autoscaler_is_waited_for_a_bounded_time_with_one_message():
    said: list[str] = []
    polls = iter([ONE_CPU, ONE_CPU, [*ONE_CPU, Node("gpu", {"GPU": 1})]])
    found = wait_until_placeable([agent(num_gpus=1)], 30, say=said.append, nodes=lambda: next(polls), autoscaling=lambda: True, poll=0.01)
    assert [n.node_id for n in found] == ["w0", "w1", "gpu"]
    assert len(said) == 1 and said[0].startswith("waiting up to 30 s for the autoscaler")
    with pytest.raises(Unplaceable) as err:
        wait_until_placeable([agent(num_gpus=1)], 0.05, nodes=lambda: ONE_CPU, autoscaling=lambda: True, poll=0.01)
    assert "the autoscaler added none within 0.05 s" in str(err.value)


def test_a_read_only_autoscaler_status_is_no_autoscaler():
    from farm.actors.placement import autoscales

    readonly = {"autoscaler_report": {"node_type_mapping": {"ab12": "node_ab12", "cd34": "node_cd34"}}}
    launching = {"autoscaler_report": {"node_type_mapping": {"ab12": "head-group", "cd34": "gpu-workers"}}}
    assert not autoscales(json.dumps(readonly))
    assert autoscales(json.dumps(launching))
    assert not autoscales(b"not json")


def test_plain_actors_go_where_declared_ones_left_cpu():
    cluster = [Node("w0", {"CPU": 1}), Node("w1", {"CPU": 1}), Node("w2", {"CPU": 2})]
    specs = plan_session_actors([agent(num_cpus=1), AgentConfig(id="http")], 64, cluster, {"heavy": 2, "http": 100})
    declared = [s for s in specs if s.declared]
    plain = [s for s in specs if not s.declared]
    assert len(declared) == 2 and len(plain) == 4
    assert nodes_of(declared) == {"w2": 1, "w0": 1} or nodes_of(declared) == {"w2": 1, "w1": 1}
    left = {"w0", "w1"} - {s.node_id for s in declared}
    assert {s.node_id for s in plain} == left | {"w2"}


def test_plain_actors_follow_the_cpus_and_a_few_conversations_need_one():
    plain = AgentConfig(id="web", kind="openai", connector="c")
    two = [Node("n", {"CPU": 2})]
    assert len(plan_session_actors([plain], 128, two, {"web": 3})) == 1  # one process, not two, for three cases
    assert len(plan_session_actors([plain], 128, two, {"web": 20})) == 2  # enough to share: a dying one never stalls the run
    assert len(plan_session_actors([plain], 128, two, None)) == 2  # a generator streams an unknown number
    assert len(plan_session_actors([plain], 128, [Node("n", {"CPU": 16})], {"web": 5000})) == 16
