"""Placement: which session actors a run starts, with what resources, on which nodes, serving
which agents (docs/reference/config.md, ``resources``).

Two kinds of session actor:

- *plain* ones ask Ray for next to nothing (:data:`PLAIN_CPU`): right for agents
  behind HTTP, whose conversations wait on the network. They serve every agent of
  the run that declares no ``resources``. Their number follows the cluster's CPUs
  and ``--parallel`` (at least :data:`PLAIN_SHARE_MIN` conversations each), and
  they are spread over the nodes that have CPUs, in proportion to them, never on
  a head started with ``num_cpus=0``.
- *declared* ones carry an agent's ``resources`` (one conversation slot each,
  running the agent's ``concurrency`` conversations at once) and serve only
  that agent. As many are started as the cluster can hold at once, and no more
  than ``--parallel`` or the agent's conversations need; each is packed onto a
  node that has what it asks for, the least-used first.

:func:`plan_session_actors` is that decision, pure (tested with fake node lists);
:func:`cluster_nodes` reads the nodes from Ray; :func:`wait_until_placeable`
refuses a request no node can meet with one sentence, or waits a bounded time
for an autoscaler to add a node that can; :func:`start_session_actors` starts
the planned actors. A job of agent ``A`` may go only to an actor whose
:attr:`SessionSpec.agents` holds ``A``.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from farm.config import AgentConfig
from farm.errors import UsageError

if TYPE_CHECKING:
    from farm.actors.session import SessionSetup

    from farm.engines import RunPlan

__all__ = [
    "MAX_PER_ACTOR",
    "Node",
    "SessionSpec",
    "Unplaceable",
    "cluster_nodes",
    "conversations",
    "plan_session_actors",
    "start_session_actors",
    "wait_until_placeable",
    "warm_key",
]

#: Conversations one session actor runs at once, at most.
MAX_PER_ACTOR = 512

#: Conversations a plain actor runs at least (when ``--parallel`` allows): an actor is a process
#: of ~110 MiB that takes ~0.3 s to start, and one holds thousands of waiting conversations.
PLAIN_SHARE_MIN = 8

#: The CPU a plain session actor asks for. Not 0: Ray places an actor that asks for nothing on
#: any node, whatever its scheduling strategy says (measured with ``ray.cluster_utils``: soft node
#: affinity was kept by 2 of 12 such actors, SPREAD spread 1 of 3 pairs; with 0.0001 CPU, all).
PLAIN_CPU = 0.0001

#: Plain session actors at most, however large the cluster.
MAX_PLAIN = 256

#: Declared session actors of one agent at most (each is a process).
MAX_DECLARED = 1024


@dataclass(frozen=True)
class Node:
    """A node of the cluster as placement sees it: its resources in ``ray.nodes()``'s names
    (``CPU``, ``GPU``, ``memory``, custom ones) and, where known, what is free of them now."""

    node_id: str
    total: Mapping[str, float]
    available: Mapping[str, float] | None = None
    """None: unknown, taken to be the total."""

    def fits(self, demand: Mapping[str, float], free: Mapping[str, float] | None = None) -> bool:
        have = self.total if free is None else free
        return all(have.get(name, 0.0) + 1e-9 >= amount for name, amount in demand.items())


@dataclass(frozen=True)
class SessionSpec:
    """One session actor to start."""

    name: str
    agents: tuple[str, ...]
    """The agents whose conversations it runs (route a job of agent A only to an actor serving A)."""
    concurrency: int
    """Conversations it runs at once."""
    options: dict[str, Any] = field(default_factory=dict)
    """Ray resources of the actor (``num_cpus``, ``num_gpus``, ``memory``, ``resources``)."""
    node_id: str | None = None
    """The node it is meant for (soft affinity: Ray may start it elsewhere, e.g. after that node is lost)."""
    declared: bool = False
    """Whether it carries an agent's declared resources (else it is a plain one)."""

    def slots(self, queue_share: float) -> int:
        """Calls it holds at once: the conversations it runs, and ``queue_share`` as many again
        queued on it, ready to start when one ends."""
        return self.concurrency + int(self.concurrency * queue_share)


class Unplaceable(UsageError):
    """An agent asks for more per slot than any node of the cluster has."""


def _describe(demand: Mapping[str, float]) -> str:
    names = {"CPU": "num_cpus", "GPU": "num_gpus"}
    parts = []
    for name, amount in demand.items():
        if name == "memory":
            parts.append(f"memory {amount / 2**30:g} GiB")
        else:
            parts.append(f"{names.get(name, name)} = {amount:g}")
    return ", ".join(parts)


def _largest(nodes: list[Node], demand: Mapping[str, float]) -> str:
    best = {name: max((n.total.get(name, 0.0) for n in nodes), default=0.0) for name in demand}
    return _describe(best) if any(best.values()) else "none"


def check_placeable(agents: Iterable[AgentConfig], nodes: list[Node]) -> None:
    """Raise :class:`Unplaceable` for the first agent whose one slot fits on no node."""
    for agent in agents:
        if agent.resources is None or not agent.declares_resources:
            continue
        demand = agent.resources.demand()
        if not any(node.fits(demand) for node in nodes):
            raise Unplaceable(
                f'agent "{agent.id}" asks for {_describe(demand)} per conversation slot (its resources), which no node'
                f" of the Ray cluster has ({len(nodes)} node(s); the most one has: {_largest(nodes, demand)})"
            )


def plan_session_actors(
    agents: Iterable[AgentConfig],
    parallel: int,
    nodes: list[Node],
    conversations: Mapping[str, int] | None = None,
    actors: int | None = None,
) -> list[SessionSpec]:
    """The session actors to start for a run of ``agents``.

    ``parallel``: conversations in flight across the cluster, at most. ``conversations``:
    how many each agent has to run (none are started beyond that; None: no bound).
    ``actors``: a fixed number of plain actors (``[farm].actors``) instead of sizing them.
    Raises :class:`Unplaceable` when an agent's slot fits on no node.
    """
    agents = list(agents)
    nodes = list(nodes)
    check_placeable(agents, nodes)
    parallel = max(1, parallel)

    def needs(agent_ids: Iterable[str]) -> float:
        if conversations is None:
            return math.inf
        return sum(conversations.get(a, 0) for a in agent_ids)

    specs: list[SessionSpec] = []
    free = {n.node_id: _free(n) for n in nodes}
    declared = [a for a in agents if a.declares_resources and needs([a.id]) > 0]
    if declared:  # first: they need what the nodes have; plain ones go where CPU is left
        specs += _declared(declared, parallel, nodes, free, {a.id: needs([a.id]) for a in declared})
    plain = tuple(a.id for a in agents if not a.declares_resources)
    if plain and needs(plain) > 0:
        specs += _plain(plain, parallel, nodes, free, needs(plain), actors)
    return specs


def _free(node: Node) -> dict[str, float]:
    """What is free on ``node``, where hundredths of a CPU in use count as free: plain session
    actors (:data:`PLAIN_CPU`), of this run or of one that is just ending, are about to go or
    are placed after the declared ones."""
    free = dict(node.available if node.available is not None else node.total)
    if "CPU" in free:
        free["CPU"] = min(node.total.get("CPU", 0.0), math.ceil(free["CPU"] * 100 - 1e-6) / 100)
    return free


def _cpu_nodes(nodes: list[Node]) -> list[Node]:
    with_cpus = [n for n in nodes if n.total.get("CPU", 0) > 0]
    return with_cpus or nodes


def _plain_count(parallel: int, cpus: float, wanted: float) -> int:
    cores = max(1, int(cpus))
    sized = min(cores, math.ceil(min(parallel, wanted) / PLAIN_SHARE_MIN), MAX_PLAIN)
    # at least two where there are two CPUs and more conversations than one actor's share, so
    # that a dying actor never stalls the run; a few conversations need one process, not two
    floor = min(2, cores) if wanted > PLAIN_SHARE_MIN else 1
    return int(max(1, min(max(floor, sized), parallel, wanted)))


def _spread(count: int, weights: Mapping[str, float]) -> list[str]:
    """``count`` places over nodes in proportion to ``weights`` (largest remainder), interleaved
    so that the first actors are on different nodes."""
    total = sum(weights.values())
    if count <= 0 or total <= 0:
        return []
    exact = {n: count * w / total for n, w in weights.items()}
    share = {n: int(x) for n, x in exact.items()}
    for n in sorted(exact, key=lambda n: (share[n] - exact[n], -weights[n]))[: count - sum(share.values())]:
        share[n] += 1
    order: list[str] = []
    while len(order) < count:
        for n in sorted(share, key=lambda n: -weights[n]):
            if share[n] > 0:
                order.append(n)
                share[n] -= 1
    return order


def _plain(
    agents: tuple[str, ...], parallel: int, nodes: list[Node], free: Mapping[str, Mapping[str, float]], wanted: float, fixed: int | None
) -> list[SessionSpec]:
    hosts = _cpu_nodes(nodes)
    cpus = sum(n.total.get("CPU", 0.0) for n in hosts)
    count = max(1, min(fixed, parallel)) if fixed else _plain_count(parallel, cpus, wanted)
    # in proportion to the CPUs of each node, of those that declared actors left room on
    weights = {n.node_id: n.total.get("CPU", 0.0) or 1.0 for n in hosts if free.get(n.node_id, {}).get("CPU", 0.0) >= PLAIN_CPU}
    weights = weights or {n.node_id: n.total.get("CPU", 0.0) or 1.0 for n in hosts}
    places: list[str | None] = list(_spread(count, weights)) or [None] * count
    return [
        SessionSpec(
            name=f"session-{i}",
            agents=agents,
            concurrency=min(MAX_PER_ACTOR, parallel // count + (i < parallel % count)),
            options={"num_cpus": PLAIN_CPU},
            node_id=places[i],
        )
        for i in range(count)
    ]


def _declared(
    agents: list[AgentConfig], parallel: int, nodes: list[Node], free: dict[str, dict[str, float]], wanted: Mapping[str, float]
) -> list[SessionSpec]:
    """Pack slots of every declared agent onto the nodes (taking them from ``free``), one agent
    after another in turn, each on the node that fits it and holds the fewest of that agent's
    actors (then the most free)."""
    by_id = {n.node_id: n for n in nodes}
    placed: dict[str, list[str]] = {a.id: [] for a in agents}
    caps: dict[str, int] = {}
    for agent in agents:
        per = agent.concurrency or (1 if _computes(agent) else None)
        caps[agent.id] = min(MAX_DECLARED, math.ceil(min(parallel, wanted[agent.id]) / (per or 1)))
        if per is None:  # neither CPUs nor GPUs nor a concurrency: share --parallel like plain actors
            caps[agent.id] = min(caps[agent.id], _plain_count(parallel, sum(n.total.get("CPU", 0) for n in nodes), wanted[agent.id]))
    growing = True
    while growing:
        growing = False
        for agent in agents:
            if len(placed[agent.id]) >= caps[agent.id]:
                continue
            assert agent.resources is not None
            demand = agent.resources.demand()
            fitting = [n for n in free if by_id[n].fits(demand, free[n])]
            if not fitting:
                continue
            mine = placed[agent.id]
            node = min(fitting, key=lambda n: (mine.count(n), -sum(free[n].get(k, 0.0) / max(v, 1e-9) for k, v in demand.items())))
            for name, amount in demand.items():
                free[node][name] = free[node].get(name, 0.0) - amount
            mine.append(node)
            growing = True
    specs = []
    for agent in agents:
        assert agent.resources is not None
        mine = placed[agent.id]
        if not mine:
            # the cluster could hold it, but everything that fits is busy now: one actor,
            # which Ray starts once a node frees up (or the autoscaler adds one)
            mine = [next(n.node_id for n in nodes if n.fits(agent.resources.demand()))]
        per = agent.concurrency or (1 if _computes(agent) else None)
        count = len(mine)
        for i, node in enumerate(mine):
            share = per or min(MAX_PER_ACTOR, parallel // count + (i < parallel % count))
            specs.append(
                SessionSpec(
                    name=f"session-{agent.id}-{i}",
                    agents=(agent.id,),
                    concurrency=max(1, share),
                    options=agent.resources.ray_options(),
                    node_id=node,
                    declared=True,
                )
            )
    return specs


def _computes(agent: AgentConfig) -> bool:
    """Whether the agent declares CPUs or GPUs: then one conversation per slot unless it says otherwise."""
    return bool(agent.resources and (agent.resources.num_cpus or agent.resources.num_gpus))


# -- on Ray ----------------------------------------------------------------------------


def cluster_nodes() -> list[Node]:
    """The cluster's live nodes (``ray.nodes()``), with what is free on each where Ray says."""
    import ray

    try:
        from ray._private import state

        free: dict[str, Any] = state.available_resources_per_node()
    except Exception:  # noqa: BLE001 - a Ray without it: plan from the totals
        free = {}
    return [
        Node(node["NodeID"], dict(node.get("Resources") or {}), free.get(node["NodeID"]))
        for node in ray.nodes()
        if node.get("Alive")
    ]


def has_autoscaler() -> bool:
    """Whether the connected cluster runs Ray's autoscaler and can add nodes: v1 publishes its
    status in the GCS's key-value store (a cluster without one runs it read-only, its node types
    named after the nodes); v2 marks itself enabled there."""
    try:
        from ray.experimental import internal_kv

        status = internal_kv._internal_kv_get("__autoscaling_status")
        if status:
            return autoscales(status)
        from ray.autoscaler.v2.utils import is_autoscaler_v2

        return bool(is_autoscaler_v2(fetch_from_server=True))
    except Exception:  # noqa: BLE001 - no answer is no autoscaler we know of
        return False


def autoscales(status: bytes | str) -> bool:
    """Whether an autoscaler v1 status (``__autoscaling_status``) comes from one that launches
    nodes: a read-only one names every node type ``node_<node id>``."""
    try:
        report = json.loads(status).get("autoscaler_report") or {}
    except (ValueError, AttributeError):
        return False
    types = set((report.get("node_type_mapping") or {}).values())
    return any(not _READONLY_TYPE.fullmatch(str(t)) for t in types)


_READONLY_TYPE = re.compile(r"node_[0-9a-f]+")


def wait_until_placeable(
    agents: Iterable[AgentConfig],
    autoscaler_wait: float,
    say: Callable[[str], None] = lambda _: None,
    nodes: Callable[[], list[Node]] = cluster_nodes,
    autoscaling: Callable[[], bool] = has_autoscaler,
    poll: float = 2.0,
) -> list[Node]:
    """The cluster's nodes once every agent's slot fits on one of them.

    A slot that fits nowhere raises :class:`Unplaceable` at once, unless the cluster
    has an autoscaler: then it is asked for such a node (``request_resources``), the
    wait is said once through ``say``, and it is bounded by ``autoscaler_wait`` seconds.
    """
    agents = list(agents)
    found = nodes()
    try:
        check_placeable(agents, found)
        return found
    except Unplaceable as exc:
        if autoscaler_wait <= 0 or not autoscaling():
            raise
        problem = exc
    bundles = [a.resources.demand() for a in agents if a.resources is not None and a.declares_resources]
    _request(bundles)
    say(f"waiting up to {autoscaler_wait:g} s for the autoscaler to add a node: {problem}")
    deadline = time.monotonic() + autoscaler_wait
    try:
        while time.monotonic() < deadline:
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
            found = nodes()
            try:
                check_placeable(agents, found)
                return found
            except Unplaceable as exc:
                problem = exc
    finally:
        _request([])
    raise Unplaceable(f"{problem}, and the autoscaler added none within {autoscaler_wait:g} s")


def _request(bundles: list[dict[str, float]]) -> None:
    try:
        from ray.autoscaler.sdk import request_resources

        request_resources(bundles=bundles)
    except Exception:  # noqa: BLE001 - only a hint to the autoscaler
        pass


def conversations(plan: RunPlan) -> dict[str, int] | None:
    """Case runs each agent of ``plan`` has to do in this part (at least 1: every agent gets an
    actor); None while a feed hands over more (a generator's)."""
    if not plan.feed.closed:
        return None
    per_agent = len(plan.cases) * plan.runs
    finished = Counter(key[3] for key in plan.skip_keys)  # (suite, case id, run index, agent)
    return {agent: max(1, per_agent - finished[agent]) for agent in plan.agents}


def start_session_actors(
    specs: list[SessionSpec], queue_share: float, setup_of: Callable[[SessionSpec], SessionSetup]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start the planned session actors, or take plain ones this process kept from its last run
    (:data:`~farm.actors.session.WARM`), and prepare each for this run.

    Returns their handles by name, and by name the reference that answers once the actor is
    prepared (it takes no job before). ``queue_share``: calls an actor holds queued beyond the
    conversations it runs, as a share of them (:meth:`SessionSpec.slots`). ``setup_of(spec)``: what
    that actor runs (:class:`~farm.actors.session.SessionSetup`).
    """
    import ray
    from farm.actors.session import KEPT_ANSWER_S, WARM

    handles: dict[str, Any] = {}
    prepared: dict[str, Any] = {}
    kept: list[SessionSpec] = []
    for spec in specs:
        taken = None if spec.declared else WARM.take(warm_key(spec))
        if taken is None:
            handle = _new_session_actor(spec, queue_share)
        else:
            handle = taken[1]
            kept.append(spec)
        handles[spec.name] = handle
        prepared[spec.name] = handle.prepare.remote(setup_of(spec))
    # a kept actor answers at once; one that died since is replaced
    for spec in kept:
        try:
            ray.get(prepared[spec.name], timeout=KEPT_ANSWER_S)
        except Exception:  # noqa: BLE001 - gone, or not answering: start a new one
            ray.kill(handles[spec.name], no_restart=True)
            handles[spec.name] = _new_session_actor(spec, queue_share)
            prepared[spec.name] = handles[spec.name].prepare.remote(setup_of(spec))
    return handles, prepared


#: The calls a plain session actor takes at once: as many as any run gives one (its conversations
#: and as many again queued, plus a few calls of the driver's), so that a kept one can serve the next
#: run whatever its ``--parallel``; the actor's own semaphore and the driver's window bound what runs.
PLAIN_MAX_CONCURRENCY = 2 * MAX_PER_ACTOR + 4


def warm_key(spec: SessionSpec, node_id: str | None = None) -> tuple[Any, ...]:
    """Which kept session actors can serve ``spec``: those with its resources, on its node
    (``node_id``: where one of them runs, which soft affinity may have made another node)."""
    return (repr(sorted(spec.options.items())), node_id or spec.node_id)


def _new_session_actor(spec: SessionSpec, queue_share: float) -> Any:
    from farm.actors.session import SessionActor
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy: Any = NodeAffinitySchedulingStrategy(spec.node_id, soft=True) if spec.node_id else "SPREAD"
    calls = spec.slots(queue_share) + 4
    if not spec.declared:
        calls = max(calls, PLAIN_MAX_CONCURRENCY)
    return SessionActor.options(max_concurrency=calls, scheduling_strategy=strategy, **spec.options).remote()
