"""What :func:`farm.run` and :func:`farm.rescore` build before a run starts: the config,
the agent under test and the selected cases; the runner's settings from the run's options;
the extra report writers.

Both calls resolve their options into a :class:`~farm.writers.runinfo.RunOptions` (what
``run.json`` records), and :func:`run_settings` turns that into the runner's
:class:`~farm.runner.RunSettings`, so a run, its resume and its rescore shape their
conversations the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.durations import parse_duration
from farm.errors import UsageError

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.loader import Suite
    from farm.reports.streamed import StreamedReport
    from farm.runner import RunSettings
    from farm.writers import ResultWriter
    from farm.writers.runinfo import RunInfo, RunOptions

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_TURN_TIMEOUT",
    "extra_writers",
    "farm_config",
    "prepare",
    "recorded_config",
    "recorded_input",
    "run_settings",
    "seconds",
]

DEFAULT_TIMEOUT = "5m"
DEFAULT_TURN_TIMEOUT = "2m"


def seconds(flag: str, value: str | float) -> float:
    """``value`` (``30s``, ``2m`` or a number) in seconds; a bad one is a usage error naming ``flag``."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def farm_config(config: str | Path | FarmConfig | None, input: str) -> FarmConfig:
    """``config`` itself, else the ``farm.toml`` it names, else the one found from ``input``."""
    from farm.config import FarmConfig, find_config, load_config
    from farm.inputs import input_path

    if isinstance(config, FarmConfig):
        return config
    return load_config(find_config(str(config) if config is not None else None, input_path(input)))


def prepare(
    input: str,
    agent: str | None,
    config: str | Path | FarmConfig | None,
    match: str | None,
    tags: list[str] | None,
    dry_run: bool,
    cache: bool = True,
) -> tuple[FarmConfig, str | None, Suite]:
    """The config, the agent under test and the selected cases."""
    from farm.inputs import resolve_input

    cfg = farm_config(config, input)
    agent_id = agent or cfg.farm.default_agent
    if agent_id is None and not dry_run and not input.startswith("scripts."):
        raise UsageError("no agent to test: give -n/--name or set [farm].default_agent in farm.toml")
    if agent_id is not None and not dry_run:
        cfg.agent(agent_id)  # fail early, naming the configured agents
    from farm.rolecache import RoleCache

    role_cache = RoleCache.for_config(cfg) if cache else None
    suite = resolve_input(input, cfg, agent_id, compact=not dry_run, cache=role_cache).select(match, tags or [])
    return cfg, agent_id, suite


def run_settings(cfg: FarmConfig, agent_id: str, run_id: str, options: RunOptions) -> RunSettings:
    """The runner's settings for a run of ``agent_id``: ``options`` where they are set, else the
    farm's defaults; the agent's own ``input_tools``, ``tool_mocks`` and ``max_tool_steps``."""
    from farm.config import AgentConfig
    from farm.runner import RunSettings

    target = cfg.agent(agent_id) if agent_id else AgentConfig(kind="python")  # script tests: no agent under test
    return RunSettings(
        agent_id=agent_id,
        run_id=run_id,
        on_missing_input=options.on_missing_input or "skip",
        case_timeout=options.timeout if options.timeout is not None else seconds("--timeout", DEFAULT_TIMEOUT),
        turn_timeout=options.turn_timeout if options.turn_timeout is not None else seconds("--turn-timeout", DEFAULT_TURN_TIMEOUT),
        interactive=bool(options.interactive),
        default_simulator=options.simulator or cfg.farm.simulator,
        input_tools=tuple(target.input_tools),
        agent_tool_mocks=dict(target.tool_mocks),
        max_tool_steps=target.max_tool_steps,
        cache=options.cache is not False,
    )


def extra_writers(
    junit: str | Path | None, html: str | Path | None, json_events: bool, run_id: str, info: dict[str, Any]
) -> tuple[list[StreamedReport], list[ResultWriter]]:
    """``(reports, streams)``: JUnit and HTML files, and the NDJSON events on standard output."""
    reports: list[StreamedReport] = []
    streams: list[ResultWriter] = []
    if json_events:
        from farm.events import EventWriter

        events = EventWriter(sys.stdout, run_id)
        events.start(info)
        streams.append(events)
    if junit:
        from farm.reports.junit import JUnitWriter

        reports.append(JUnitWriter(Path(junit), run_id))
    if html:
        from farm.reports.html import HTMLWriter

        reports.append(HTMLWriter(Path(html), run_id))
    return reports, streams


def recorded_input(info: RunInfo) -> str | None:
    """The input a run was started with, found from here: a relative suite file resolves against
    the folder the run started in (``info.cwd``; for a run that did not record it, the folder of
    its ``farm.toml``) when it is not beside us."""
    from farm.inputs import input_path

    value = info.input
    path = input_path(value) if value else None
    if value is None or path is None or path.is_absolute() or path.exists():
        return value
    config_path = info.config.get("path")
    for folder in (info.cwd, str(Path(config_path).parent) if config_path else None):
        if folder and (Path(folder) / path).exists():
            return str(Path(folder) / path)
    return value


def recorded_config(info: RunInfo) -> Path | None:
    """The ``farm.toml`` a run used, when it is still there."""
    path = info.config.get("path")
    return Path(path) if path and Path(path).is_file() else None
