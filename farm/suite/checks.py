"""A loaded suite against the config, before any agent is called.

:func:`check_suite` checks a loaded suite against the config (when one is found): simulator,
validator and connector ids, ``file://`` attachments and ``scripts:`` references.
:func:`check_run` checks what ``farm test`` is about to use: the target agent's ``python``
entry imports, connectors' keys are set. The checks of a case on its own are
:mod:`farm.suite.validation`, below the loader; these sit above it, as they take a loaded suite.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.cases import TestCase, role_agent_id
from farm.errors import FarmError, UsageError
from farm.messages import user_messages
from farm.suite.validation import every_assertion
from farm.wording import nearest, shown

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.suite.loader import Suite

__all__ = ["check_before_run", "check_budget", "check_cases", "check_for_run", "check_run", "check_suite"]


def check_suite(suite: Suite, config: FarmConfig, default_simulator: str | None = None) -> None:
    """Mark every case that names something the config lacks as an error (in place), adding to
    the problems of a case that has others (when its model could still be made).

    ``config.path`` None (no ``farm.toml`` found): agent and connector ids are not
    checked, but attachments and ``scripts:`` references are.
    """
    from farm.scripts import ScriptResolver

    resolver = ScriptResolver(config.scripts_dir)
    simulator = default_simulator or config.farm.simulator
    folder = cache(Path)  # one Path a folder, not one a case
    for loaded in suite.cases:
        if loaded.script is not None:
            continue
        case = loaded.materialized().case if loaded.ok else loaded.partial
        loaded.partial = None  # kept only for this check
        if case is None:
            continue
        problems = _config_problems(case, config, simulator, resolver, folder(loaded.base_dir) if loaded.base_dir else None)
        if problems:
            loaded.fail(problems)


def _config_problems(
    case: TestCase, config: FarmConfig, simulator: str | None, resolver: Any, base_dir: Path | None
) -> list[str]:
    out: list[str] = []
    checked = config.path is not None

    def agent(where: str, agent_id: str) -> None:
        if checked and agent_id not in config.agents:
            known = ", ".join(sorted(config.agents)) or "none"
            out.append(
                f"field '{where}': agent '{agent_id}' is not configured in {config.path}{nearest(agent_id, config.agents)} (configured: {known})"
            )

    def connector(where: str, options: Any) -> None:
        name = getattr(options, "connector", None)
        if checked and name and name not in config.connectors:
            known = ", ".join(sorted(config.connectors)) or "none"
            out.append(
                f"field '{where}.connector': connector '{name}' is not configured in {config.path}{nearest(name, config.connectors)} (configured: {known})"
            )

    def script(where: str, reference: str) -> None:
        try:
            resolver.resolve(reference)
        except FarmError as exc:
            out.append(f"field '{where}': {exc}")

    connector("options", case.options)
    if case.checkpoints is not None or case.simulator is not None:
        sim_id = case.simulator.use if case.simulator and case.simulator.use else None
        if sim_id:
            agent("simulator.use", role_agent_id(sim_id, None) or sim_id)
        elif case.checkpoints is not None and not simulator:
            out.append(
                "field 'simulator': the case has checkpoints but no simulator; give 'simulator.use' in the case, or a default simulator with --simulator or [farm].simulator"
            )
        if case.simulator:
            connector("simulator.options", case.simulator.options)
    for t, turn in enumerate(case.turns or []):
        if turn.options:
            connector(f"turns[{t}].options", turn.options)
    for where, spec in every_assertion(case):
        if spec.options:
            connector(f"{where}.options", spec.options)
        if spec.type == "agent":
            validator = role_agent_id(spec.use, config.farm.validator)
            if validator:
                agent(f"{where}.use", validator)
            elif checked:
                out.append(
                    f"field '{where}': an 'agent' assertion needs 'use' (e.g. agents:workers.test.validator) or [farm].validator"
                )
        if spec.type == "script" and spec.use:
            script(f"{where}.script", spec.use)
    if case.golden is not None and case.golden.enabled and case.golden.text == "judge":
        validator = role_agent_id(case.golden.use, config.farm.validator)
        if validator:
            agent("golden.use", validator)
        elif checked:
            out.append("field 'golden': the 'judge' rule needs 'use' (a validator agent) or [farm].validator")
    for hook in ("before", "after"):
        if getattr(case, hook):
            script(hook, getattr(case, hook))
    for tool, mock in case.tool_mocks.items():
        if isinstance(mock, str) and mock.startswith("scripts:"):
            script(f"tool_mocks.{tool}", mock)
    inputs = [("input", case.input, case.attachments)] if case.turns is None else []
    for t, turn in enumerate(case.turns or []):
        inputs.append((f"turns[{t}]", turn.input, [*(case.attachments if t == 0 else []), *turn.attachments]))
    for where, value, attachments in inputs:
        if value is None and not attachments:
            continue
        try:
            user_messages(value if value is not None else "", attachments, base_dir)
        except (ValueError, OSError) as exc:
            out.append(f"field '{where}': {exc}")
    return out


def check_run(config: FarmConfig, agent_id: str, connector_override: str | None, role_agents: Iterable[str] = ()) -> None:
    """What ``farm test`` is about to call must be usable; raises :class:`UsageError` (exit 2).

    The target agent (and any role agents the suite names): a ``python`` entry
    that imports, a connector that exists and whose ``api_key_env`` is set.
    """
    seen: set[str] = set()
    todo = [(agent_id, connector_override)] + [(a, None) for a in role_agents]
    while todo:
        current, override = todo.pop(0)
        if current in seen or current not in config.agents:
            continue
        seen.add(current)
        agent = config.agent(current)
        name = override or agent.connector
        lacking = agent.lacks(name)
        if lacking is not None:  # else its client cannot be made, and every case calling it would end in error
            key, why = lacking
            raise UsageError(f"{config.place('agents', current, key)}: {why}")
        if agent.kind == "python":  # its entry must import (the agents' clients load only then: farm validate stays quick)
            import sys

            from farm.agents.python import load_entry

            folder = str(config.base_dir)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            load_entry(agent.entry, current, config.place("agents", current, "entry"))
        if name:
            conn = config.connector(name)
            if conn.api_key_env and not config.api_key(name):
                raise UsageError(
                    f"{config.place('connectors', name, 'api_key_env')}: connector '{name}' (used by agent '{current}')"
                    f" reads its key from ${conn.api_key_env}, which is not set"
                )
        if agent.is_role and agent.uses:
            todo.append((agent.uses, override))


def _testable(config: FarmConfig, agent_id: str) -> None:
    """A role agent (simulator, validator, generator, reporter) is no agent to test: a :class:`UsageError`."""
    agent = config.agents.get(agent_id)
    if agent is not None and agent.is_role:
        testable = sorted(name for name, other in config.agents.items() if not other.is_role)
        hint = f" ({', '.join(testable)})" if testable else ""
        raise UsageError(
            f"-n {shown(agent_id)}: agent '{shown(agent_id)}' is a {agent.kind}, a role the farm plays, not an agent to test;"
            f" name an openai, http or python agent{hint}"
        )


def check_for_run(
    suite: Suite,
    config: FarmConfig,
    agent_id: str | None,
    *,
    simulator: str | None = None,
    connector: str | None = None,
    dry_run: bool = False,
) -> None:
    """The load step's checks, as ``farm test`` makes them before any agent is called.

    Cases that name what the config lacks become errors (:func:`check_suite`);
    unless ``dry_run``, the agents the run will call must be usable
    (:func:`check_run`, a :class:`UsageError`: exit 2, nothing started).
    """
    check_suite(suite, config, default_simulator=simulator)
    if agent_id is not None:
        _testable(config, agent_id)
    if dry_run or agent_id is None:
        return
    roles: list[str] = []
    default_sim = simulator or config.farm.simulator
    for loaded in suite.cases:
        sim, val = loaded.needs
        if sim and default_sim:
            roles.append(default_sim)
        if (sim or val) and loaded.ok:
            case = loaded.materialized().case
            assert case is not None
            if case.simulator and case.simulator.use:
                roles.append(role_agent_id(case.simulator.use, None) or "")
            for _, spec in every_assertion(case):
                if spec.type == "agent":
                    roles.append(role_agent_id(spec.use, config.farm.validator) or "")
            if case.golden is not None and case.golden.text == "judge":
                roles.append(role_agent_id(case.golden.use, config.farm.validator) or "")
    check_run(config, agent_id, connector, dict.fromkeys(r for r in roles if r))


def check_budget(
    config: FarmConfig,
    max_cost: float | None,
    named: str = "--max-cost",
    agents: Sequence[str] = (),
    connector: str | None = None,
) -> None:
    """A budget needs a price to count against, so a budget that could not count is a
    :class:`UsageError` before anything is sent: with no connector priced every cost is unknown,
    and a connector the run calls for ``agents`` (``connector``, ``-c``, over each agent's own)
    with no price would spend what the budget never sees. ``named``: where the budget came from
    (``--max-cost``, ``[farm].max_cost``, the resumed run's)."""
    if max_cost is None:
        return
    where = f"in {config.path}" if config.path else "configured"
    if not any(c.price is not None for c in config.connectors.values()):
        raise UsageError(
            f"{named} ${max_cost:g}: no connector {where} has a price, so no cost can be counted; "
            f"give the connectors a price (price = {{ input = ..., output = ... }}) or drop {named}"
        )
    for agent_id in agents:
        name = connector or (config.agents[agent_id].connector if agent_id in config.agents else None)
        if name and name in config.connectors and config.connectors[name].price is None:
            caller = f"-c {shown(name)}" if connector else f"agent '{shown(agent_id)}'"
            raise UsageError(
                f"{named} ${max_cost:g}: {caller} calls connector '{shown(name)}' {where}, which has no price, so the "
                f"budget cannot count its calls; give it a price (price = {{ input = ..., output = ... }}) or drop {named}"
            )


def check_cases(suite: Suite, match: str | None = None, tags: Sequence[str] = (), what: str = "run") -> None:
    """A suite with no case to ``what`` (``run``, ``rescore``) is a :class:`UsageError`: an empty file,
    or a selection (``--run``, ``--tag``) that matches none, which the sentence names."""
    if suite.expected:
        return
    chosen = [*([f"--run {match}"] if match else []), *(f"--tag {tag}" for tag in tags)]
    if chosen:
        raise UsageError(f"{suite.description}: no test case matches {' '.join(chosen)}")
    raise UsageError(f"{suite.description}: no test cases to {what}")


def check_before_run(
    suite: Suite,
    config: FarmConfig,
    agents: Sequence[str],
    *,
    simulator: str | None = None,
    connector: str | None = None,
    max_cost: float | None = None,
    max_cost_from: str = "[farm].max_cost",
    dry_run: bool = False,
    golden_dir: Path | None = None,
    recording: bool = False,
    reporter: str | None = None,
) -> None:
    """Every check ``farm test`` makes before its first agent call, which ``farm validate`` makes
    too, so that nothing passes one that the other refuses: the agents under test are configured
    and testable, the suite names only what the config has (cases that do not become errors,
    :func:`check_suite`), and, unless ``dry_run``, every agent the run calls is usable (a
    ``python`` entry that imports, a key that is set: :func:`check_run`), the ``-c`` connector is
    configured, every key can be sent and a budget has a price to count against.

    ``golden_dir``: the run's golden folder (``--golden``, else ``[farm].golden_dir``), which a
    case that sets ``golden`` needs unless the run is ``recording`` them (``--update-golden``);
    ``reporter``: the agent that writes the run's report (``-r``), which must be configured and usable.

    A mistake of the command or the config is a :class:`UsageError`; the suite's problems stay on
    its cases (:attr:`Suite.problems`), for the caller to list.
    """
    for agent_id in agents:
        config.agent(agent_id)  # fail early, naming the configured agents
    if connector and not dry_run:
        config.connector(connector)
    tested: list[str | None] = [*agents] or [None]
    for each in tested:
        check_for_run(suite, config, each, simulator=simulator, connector=connector, dry_run=dry_run)
    if not recording:
        from farm.conversation.golden import check_folder

        check_folder(suite.cases, golden_dir)
    if not dry_run:
        config.check_keys()  # a key with a stray newline
        check_budget(config, max_cost, max_cost_from, agents, connector)
        if reporter is not None:
            try:
                config.agent(reporter)
                check_run(config, reporter, None)
            except UsageError as exc:
                raise UsageError(f"-r {shown(reporter)}: {exc}") from None
