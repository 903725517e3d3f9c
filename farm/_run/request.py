"""A run's options, resolved in one place: what the caller gave (a frozen :class:`RunRequest`),
one table of every option (:data:`OPTIONS`), and :func:`resolve`, which fills each from the
first of: the value given, the resumed run's own (its ``run.json``), the farm's (``[farm]`` in
``farm.toml``), the option's one default.

``farm test``, :func:`farm.run` and :func:`farm.rescore` all leave an option they were not given
at None, so its default is said here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from farm.conversation.settings import DEFAULT_CASE_TIMEOUT, DEFAULT_TURN_TIMEOUT
from farm.durations import parse_duration
from farm.errors import UsageError
from farm.gate import DEFAULT_MIN_PASS_RATE, check_min_pass_rate

if TYPE_CHECKING:
    from rich.console import Console

    from farm.config import FarmConfig, FarmSettings
    from farm.writers.runinfo import RunInfo, RunOptions

_T = TypeVar("_T")

__all__ = ["ALIASES", "NO_INPUT", "OPTIONS", "Option", "Resolved", "RunRequest", "filled", "locate", "recorded_config", "recorded_input", "resolve", "seconds"]


@dataclass(frozen=True)
class RunRequest:
    """What the caller of :func:`farm.run` gave, None where it gave nothing (:data:`OPTIONS` says
    what each is and what it is when not given)."""

    input: str | Sequence[str] | None = None
    config: str | Path | FarmConfig | None = None
    agent: str | Sequence[str] | None = None
    engine: str | None = None
    output: str | Path | None = None
    connector: str | None = None
    parallel: int | None = None
    runs: int | None = None
    timeout: str | float | None = None
    turn_timeout: str | float | None = None
    on_missing_input: str | None = None
    simulator: str | None = None
    match: str | None = None
    tags: list[str] | None = None
    fail_fast: bool | None = None
    dry_run: bool | None = None
    resume: str | Path | None = None
    address: str | None = None
    interactive: bool | None = None
    skip_interactive: bool | None = None
    junit: str | Path | None = None
    html: str | Path | None = None
    json_events: bool | None = None
    golden: str | Path | None = None
    update_golden: str | Path | None = None
    before: str | None = None
    after: str | None = None
    reporter: str | None = None
    verbose: bool | None = None
    console: Console | None = None
    quiet: bool | None = None
    command: list[str] | None = None
    cache: bool | None = None
    retries: int | None = None
    max_cost: float | None = None
    min_pass_rate: float | None = None
    baseline: str | Path | None = None
    retry_errors: bool | None = None

    @classmethod
    def of(cls, keywords: dict[str, Any]) -> RunRequest:
        """The request of :func:`farm.run`'s ``keywords``, each CLI name (:data:`ALIASES`) folded into
        its option; both given, and different, is a :class:`UsageError`."""
        given = dict(keywords)
        for cli_name, keyword in ALIASES.items():
            value, cli_value = given.get(keyword), given.pop(cli_name, None)
            if value is not None and cli_value is not None and value != cli_value:
                raise UsageError(f"farm.run: {keyword}={value!r} and {cli_name}={cli_value!r} name the same option; give one")
            given[keyword] = value if value is not None else cli_value
        if not given.get("agent"):
            given["agent"] = None  # no agent named (``[]``, ``""``): the resumed run's, else [farm]'s
        return cls(**given)


@dataclass(frozen=True)
class Option:
    """One option: its ``farm test`` flag, its one default, and where a value not given comes from."""

    flag: str | None
    """Its long flag on ``farm test``; None: the Python API's alone."""
    default: Any = None
    """Its value when nothing gives one (None: none, or one the run works out, said in ``note``)."""
    resumed: Callable[[RunInfo], Any] | None = None
    """The resumed (or rescored) run's value, from its ``run.json``; None: not taken from it."""
    farm: str | None = None
    """The ``[farm]`` setting that gives it; None: none."""
    note: str = ""
    """What a default of None means, where it means more than "none"."""


def _recorded(name: str) -> Callable[[RunInfo], Any]:
    return lambda info: getattr(info.options, name)


def _agents(info: RunInfo) -> list[str] | None:
    return list(info.agents or ([info.agent] if info.agent else [])) or None


def recorded_input(info: RunInfo) -> list[str] | None:
    """The inputs a run was started with, found from here: a relative suite path resolves against
    the folder the run started in (``info.cwd``; for a run that did not record it, the folder of
    its ``farm.toml``) when it is not beside us."""
    values = info.inputs or ([info.input] if info.input else [])
    return [_found(info, value) for value in values] or None


def _found(info: RunInfo, value: str) -> str:
    from farm.inputs import looks_like_path

    if value.startswith(("agents:", "scripts:", "scripts.")) or value == "-" or not looks_like_path(value):
        return value
    path = Path(value)
    if path.is_absolute() or path.exists():
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


NO_INPUT = "no input: give -i/--input (a .jsonl file, a folder of them, a message, agents:<id>, scripts:<id> or -)"

OPTIONS: dict[str, Option] = {
    "input": Option("--input", resumed=recorded_input),
    "config": Option("--config", resumed=recorded_config, note="./farm.toml, else the input file's folder and its parents"),
    "agent": Option("--name", resumed=_agents, farm="default_agent"),
    "engine": Option("--engine", "auto", resumed=lambda info: info.engine, farm="engine"),
    "output": Option("--output", resumed=lambda info: info.results, note="results.jsonl in the run folder"),
    "connector": Option("--connector", resumed=_recorded("connector"), note="each agent's own"),
    "parallel": Option("--parallel", resumed=lambda info: info.parallel, note="from the connectors' limits (farm.ratelimit)"),
    "runs": Option("--runs", 1, resumed=lambda info: info.runs),
    "timeout": Option("--timeout", DEFAULT_CASE_TIMEOUT, resumed=_recorded("timeout")),
    "turn_timeout": Option("--turn-timeout", DEFAULT_TURN_TIMEOUT, resumed=_recorded("turn_timeout")),
    "on_missing_input": Option("--on-missing-input", "skip", resumed=_recorded("on_missing_input")),
    "simulator": Option("--simulator", resumed=_recorded("simulator"), farm="simulator"),
    "match": Option("--run", resumed=_recorded("match")),
    "tags": Option("--tag", resumed=lambda info: list(info.options.tags or []) or None),
    "fail_fast": Option("--fail-fast", False),
    "dry_run": Option("--dry-run", False),
    "resume": Option("--resume"),
    "address": Option("--address", note="the embedded local Ray"),
    "interactive": Option("--interactive", False),
    "skip_interactive": Option("--skip-interactive", False),
    "junit": Option("--junit"),
    "html": Option("--html"),
    "json_events": Option("--json", False),
    "golden": Option("--golden", resumed=_recorded("golden"), note="the cases that set golden, in [farm].golden_dir"),
    "update_golden": Option("--update-golden", resumed=_recorded("update_golden")),
    "before": Option("--before"),
    "after": Option("--after"),
    "reporter": Option("--reporter"),
    "verbose": Option("--verbose", False),
    "console": Option(None, note="standard output (standard error with --json)"),
    "quiet": Option("--quiet", False),
    "command": Option(None, note="the call, as farm.run([input])"),
    "cache": Option("--no-cache", True),
    "retries": Option("--retries", 0, resumed=_recorded("retries")),
    "max_cost": Option("--max-cost", resumed=_recorded("max_cost"), farm="max_cost"),
    "min_pass_rate": Option("--min-pass-rate", DEFAULT_MIN_PASS_RATE, resumed=_recorded("min_pass_rate"), farm="min_pass_rate"),
    "baseline": Option("--baseline", resumed=_recorded("baseline")),
    "retry_errors": Option("--retry-errors", False),
}
"""Every option of :func:`farm.run`, by keyword: the one table of their defaults and precedence."""

ALIASES = {"run": "match", "name": "agent", "json": "json_events"}
"""The CLI's names that :func:`farm.run` takes too, and the option each names."""


@dataclass(frozen=True)
class Resolved:
    """A run's options, each resolved: ``request`` with every option filled as :data:`OPTIONS` says,
    and the ones the run reads typed."""

    request: RunRequest
    given: RunRequest
    """What the caller gave, before resolving."""
    inputs: tuple[str, ...]
    """The ``-i`` values, in order (:func:`farm.inputs.load_inputs` loads them)."""
    agents: list[str]
    runs: int
    engine: str
    options: RunOptions
    """What ``run.json`` records of them, for a resume and a rescore."""

    @property
    def input(self) -> str:
        """The inputs in one line, as the console, ``run.json`` and the hooks name them."""
        from farm.inputs import input_text

        return input_text(self.inputs)


def resolve(request: RunRequest, previous: RunInfo | None, config: FarmConfig) -> Resolved:
    """Every option of ``request``: the value given, else the resumed run's (``previous``), else
    ``config``'s ``[farm]``, else its default. A value that cannot be is a :class:`UsageError`
    naming its flag."""
    where: dict[str, str] = {}
    done = replace(request, **{name: _pick(request, name, previous, config.farm, where) for name in OPTIONS})
    inputs = (done.input,) if isinstance(done.input, str) else tuple(done.input or ())
    if not inputs:
        raise UsageError(NO_INPUT)
    runs = filled(done.runs)
    if runs < 1:
        raise UsageError(f"--runs: {runs} is not a positive number")
    agents = [done.agent] if isinstance(done.agent, str) else list(done.agent or [])
    if len(set(agents)) != len(agents):
        raise UsageError(f"-n/--name: {', '.join(agents)} names an agent twice")
    return Resolved(done, request, inputs, agents, runs, str(done.engine), _run_options(done, where.get("min_pass_rate", "")))


def locate(request: RunRequest, previous: RunInfo | None) -> FarmConfig:
    """The run's config: the one given, else the resumed run's own ``farm.toml`` (wherever the
    resume starts), else the one found from the input. No input at all is a :class:`UsageError`."""
    from farm._run.setup import farm_config

    input = _pick(request, "input", previous, None, {})
    if not input:
        raise UsageError(NO_INPUT)
    return farm_config(_pick(request, "config", previous, None, {}), input)


def _pick(request: RunRequest, name: str, previous: RunInfo | None, farm: FarmSettings | None, where: dict[str, str]) -> Any:
    """``name``'s value by the table's precedence; ``where`` learns which gave it (for a message)."""
    option = OPTIONS[name]
    sources = [
        (f"{option.flag}", lambda: getattr(request, name)),
        (f"run.json's options.{name}", lambda: option.resumed(previous) if option.resumed and previous else None),
        (f"farm.toml: [farm].{option.farm}", lambda: getattr(farm, option.farm) if option.farm and farm else None),
    ]
    for source, value in sources:
        found = value()
        if found is not None and found != "":  # an empty string names nothing, as no value
            where[name] = source
            return found
    return option.default


def _run_options(given: RunRequest, min_pass_rate_from: str) -> RunOptions:
    """What ``run.json`` records of ``given``; a value that cannot be is a :class:`UsageError`."""
    from farm.writers.runinfo import RunOptions

    if given.on_missing_input not in ("skip", "fail"):
        raise UsageError(f"--on-missing-input: '{given.on_missing_input}' is not one of: skip, fail")
    if filled(given.retries) < 0:
        raise UsageError(f"--retries: {given.retries} is not 0 or more")
    max_cost = given.max_cost
    if max_cost is not None and not (math.isfinite(max_cost) and max_cost > 0):
        raise UsageError(f"--max-cost: {max_cost} is not a positive amount of USD")
    if given.timeout is None or given.turn_timeout is None:
        raise ValueError("the timeouts were not resolved: resolve() fills them")
    return RunOptions(
        timeout=seconds("--timeout", given.timeout),
        turn_timeout=seconds("--turn-timeout", given.turn_timeout),
        on_missing_input=given.on_missing_input,  # type: ignore[arg-type]  # checked above
        simulator=given.simulator,
        fail_fast=given.fail_fast,
        match=given.match,
        tags=list(given.tags or []),
        interactive=given.interactive,
        connector=given.connector,
        golden=str(given.golden) if given.golden is not None else None,
        update_golden=str(given.update_golden) if given.update_golden is not None else None,
        retries=given.retries,
        cache=given.cache,
        max_cost=max_cost,
        min_pass_rate=check_min_pass_rate(filled(given.min_pass_rate), min_pass_rate_from),
        baseline=str(given.baseline) if given.baseline is not None else None,
    )


def seconds(flag: str, value: str | float) -> float:
    """``value`` (``30s``, ``2m`` or a number) in seconds; a bad one is a usage error naming ``flag``."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def filled(value: _T | None) -> _T:
    """An option's resolved value, which its default keeps from being None."""
    if value is None:
        raise ValueError("an option with a default was not resolved: resolve() fills it")
    return value
