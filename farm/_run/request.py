"""A run's options, resolved in one place: what the caller gave (a frozen :class:`RunRequest`),
one table of every option (:data:`OPTIONS`), and :func:`resolve`, which fills each from the
first of: the value given, the resumed run's own (its ``run.json``), the farm's (``[farm]`` in
``farm.toml``), the option's one default.

``farm test``, :func:`farm.run` and :func:`farm.rescore` all leave an option they were not given
at None, so its default is said here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from farm.conversation.settings import DEFAULT_CASE_TIMEOUT, DEFAULT_TURN_TIMEOUT
from farm.durations import parse_duration
from farm.errors import UsageError
from farm.gate import DEFAULT_MIN_PASS_RATE, check_min_pass_rate
from farm.results._folder import RESULTS_JSONL, RUN_JSON
from farm.sequential import DEFAULT_ALPHA, DEFAULT_DELTA, Runs, parse_runs

if TYPE_CHECKING:
    from rich.console import Console

    from farm.config import FarmConfig, FarmSettings
    from farm.writers.runinfo import RunInfo, RunOptions

__all__ = [
    "ALIASES",
    "NO_INPUT",
    "OPTIONS",
    "Option",
    "ResolvedOptions",
    "RunRequest",
    "farm_config",
    "locate",
    "recorded_config",
    "recorded_input",
    "resolve",
    "seconds",
]


@dataclass(frozen=True)
class RunRequest:
    """What the caller of :func:`farm.run` gave, None where it gave nothing (:data:`OPTIONS` says
    what each is and what it is when not given). A number may be given as text (the command line
    gives it so): :func:`resolve` reads it, and says a bad one in the farm's words."""

    input: str | Sequence[str] | None = None
    config: str | Path | FarmConfig | None = None
    agent: str | Sequence[str] | None = None
    engine: str | None = None
    output: str | Path | None = None
    connector: str | None = None
    parallel: int | str | None = None
    runs: int | str | None = None
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
    retries: int | str | None = None
    max_cost: float | str | None = None
    min_pass_rate: float | str | None = None
    baseline: str | Path | None = None
    retry_errors: bool | None = None
    alpha: float | str | None = None
    delta: float | str | None = None
    attribute: bool | None = None
    simulator_failures: str | None = None
    otlp: str | None = None
    otlp_content: bool | None = None

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
    from farm.inputkind import input_kind

    if input_kind(value) != "file":
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
    "output": Option("--output", resumed=lambda info: info.results, note=f"{RESULTS_JSONL} in the run folder"),
    "connector": Option("--connector", resumed=_recorded("connector"), note="each agent's own"),
    "parallel": Option("--parallel", resumed=lambda info: info.parallel, note="from the connectors' limits (farm.ratelimit)"),
    "runs": Option(
        "--runs",
        1,
        resumed=lambda info: info.options.adaptive_runs or info.runs,
        note="N, auto (2..10) or MIN..MAX: adaptive repeats",
    ),
    "timeout": Option("--timeout", DEFAULT_CASE_TIMEOUT, resumed=_recorded("timeout")),
    "turn_timeout": Option("--turn-timeout", DEFAULT_TURN_TIMEOUT, resumed=_recorded("turn_timeout")),
    "on_missing_input": Option("--on-missing-input", "skip", resumed=_recorded("on_missing_input")),
    "simulator": Option("--simulator", resumed=_recorded("simulator"), farm="simulator"),
    "match": Option("--run", resumed=_recorded("match")),
    "tags": Option("--tag", (), resumed=lambda info: tuple(info.options.tags or ()) or None),
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
    "alpha": Option("--alpha", DEFAULT_ALPHA, resumed=_recorded("alpha")),
    "delta": Option("--delta", DEFAULT_DELTA, resumed=_recorded("delta")),
    "attribute": Option("--attribute", False, resumed=_recorded("attribute"), farm="attribute"),
    "simulator_failures": Option(
        "--simulator-failures", "failure", resumed=_recorded("simulator_failures"), farm="simulator_failures"
    ),
    "otlp": Option("--otlp", farm="otlp_endpoint", note="OTEL_EXPORTER_OTLP_ENDPOINT when set; else nothing is sent"),
    "otlp_content": Option("--otlp-content", False),
}
"""Every option of :func:`farm.run`, by keyword: the one table of their defaults and precedence."""

ALIASES = {"run": "match", "name": "agent", "json": "json_events"}
"""The CLI's names that :func:`farm.run` takes too, and the option each names."""


@dataclass(frozen=True)
class ResolvedOptions:
    """Every option of a run, resolved by :func:`resolve` and typed: a field is None only where
    None means something (no budget, no baseline, the agent's own connector), never where a
    default exists. Its fields are :data:`OPTIONS`' rows, ``input`` and ``agent`` as ``inputs``
    and ``agents``."""

    given: RunRequest
    """What the caller gave, before resolving."""
    inputs: tuple[str, ...]
    """The ``-i`` values, in order (:func:`farm.inputs.load_inputs` loads them)."""
    config: str | Path | FarmConfig | None
    agents: list[str]
    """Every agent under test, in the order of ``-n``; empty: script tests, which call agents themselves."""
    engine: str
    output: str | Path | None
    connector: str | None
    parallel: int | None
    """None: sized from the connectors' limits when the run is planned."""
    runs: int
    """The most tries of each case: a :class:`~farm.sequential.Runs`, adaptive with ``--runs auto``
    or ``MIN..MAX``."""
    timeout: float
    turn_timeout: float
    on_missing_input: Literal["skip", "fail"]
    simulator: str | None
    match: str | None
    tags: tuple[str, ...]
    fail_fast: bool
    dry_run: bool
    resume: str | Path | None
    address: str | None
    interactive: bool
    skip_interactive: bool
    junit: str | Path | None
    html: str | Path | None
    json_events: bool
    golden: str | Path | None
    update_golden: str | Path | None
    before: str | None
    after: str | None
    reporter: str | None
    verbose: bool
    console: Console | None
    quiet: bool
    command: list[str] | None
    cache: bool
    retries: int
    max_cost: float | None
    min_pass_rate: float
    baseline: str | None
    """A run folder, or ``last``; None: no comparison."""
    retry_errors: bool
    alpha: float
    """The error level of each decision of adaptive repeats."""
    delta: float
    """The indifference zone's half-width around the gate under adaptive repeats."""
    attribute: bool
    """Whether a failed dynamic case that no simulator flag settles asks the attributor whose failure it is."""
    simulator_failures: Literal["failure", "error"]
    """What a failed dynamic case blamed on the simulator becomes: a ``failure`` or an ``error``."""
    otlp: str | None
    """The OTLP/HTTP endpoint each case run is sent to as a trace (docs/traces.md); None: none."""
    otlp_content: bool
    """Whether the exported turn spans carry the messages' content."""
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    """Where each option's value came from (``--max-cost``, ``run.json's options.max_cost``,
    ``farm.toml: [farm].max_cost``); an option at its default is not in it."""

    @property
    def input(self) -> str:
        """The inputs in one line, as the console, ``run.json`` and the hooks name them."""
        from farm.inputs import input_text

        return input_text(self.inputs)

    @property
    def adaptive_runs(self) -> str | None:
        """``MIN..MAX`` under adaptive repeats (``--runs auto`` is ``2..10``), as ``run.json`` records
        it for a resume; None under ``--runs N``."""
        return self.runs.spec if isinstance(self.runs, Runs) else None

    @property
    def recorded(self) -> RunOptions:
        """What ``run.json`` records of the options that shape the results, for a resume and a rescore."""
        from farm.writers.runinfo import RunOptions

        recorded = {name: getattr(self, name) for name in RunOptions.model_fields}  # every field it has, by name
        return RunOptions.model_validate(
            {name: list(v) if isinstance(v, tuple) else str(v) if isinstance(v, Path) else v for name, v in recorded.items()}
        )


def resolve(request: RunRequest, previous: RunInfo | None, config: FarmConfig) -> ResolvedOptions:
    """Every option of ``request``: the value given, else the resumed run's (``previous``), else
    ``config``'s ``[farm]``, else its default. A value that cannot be is a :class:`UsageError`
    naming where it came from."""
    where: dict[str, str] = {}
    done = {name: _pick(request, name, previous, config.farm, where) for name in OPTIONS}
    inputs = (done.pop("input"),) if isinstance(done["input"], str) else tuple(done.pop("input") or ())
    if not inputs:
        raise UsageError(NO_INPUT)
    agent = done.pop("agent")
    agents = [agent] if isinstance(agent, str) else list(agent or [])
    if len(set(agents)) != len(agents):
        raise UsageError(f"-n/--name: {', '.join(agents)} names an agent twice")
    done["runs"] = parse_runs(done["runs"], where.get("runs", "--runs"))
    done["otlp"] = _otlp(done["otlp"], where)
    if request.resume is not None and request.input and previous is not None:
        inputs = _same_inputs(inputs, previous, request.resume)
    _numbers(done, where)
    _check(done, where)
    done.update(
        timeout=seconds("--timeout", done["timeout"]),
        turn_timeout=seconds("--turn-timeout", done["turn_timeout"]),
        tags=tuple(done["tags"]),
        engine=str(done["engine"]),
        min_pass_rate=check_min_pass_rate(done["min_pass_rate"], where.get("min_pass_rate", "--min-pass-rate")),
        baseline=str(done["baseline"]) if done["baseline"] is not None else None,
    )
    return ResolvedOptions(given=request, inputs=inputs, agents=agents, sources=where, **done)


def _numbers(done: dict[str, Any], where: dict[str, str]) -> None:
    """The options that are numbers, read (the command line gives them as text): a value that is
    not one, or out of its range, is a :class:`UsageError` naming its flag and the value."""
    from farm.numbers import as_number, whole

    if done["parallel"] is not None:
        done["parallel"] = whole(_flag("parallel", where), done["parallel"], 1)
    done["retries"] = whole(_flag("retries", where), done["retries"], 0)
    for name in ("alpha", "delta"):
        value = as_number(done[name])
        if value is None or not 0.0 < value < 0.5:
            raise UsageError(
                f"{_flag(name, where)}: {done[name]} is not between 0 and 0.5 (excluded), e.g. {OPTIONS[name].default}"
            )
        done[name] = value
    if done["max_cost"] is not None:
        max_cost = as_number(done["max_cost"])
        if max_cost is None or max_cost <= 0:
            raise UsageError(f"{_flag('max_cost', where)}: {done['max_cost']} is not a positive amount of USD")
        done["max_cost"] = max_cost


def _flag(name: str, where: dict[str, str]) -> str:
    """How a message names where option ``name``'s value came from: its flag, or the resumed run's ``run.json``."""
    source = where.get(name, "")
    return source if source.startswith(RUN_JSON) else str(OPTIONS[name].flag)


def _check(done: dict[str, Any], where: dict[str, str]) -> None:
    """A value that cannot be, or that would do nothing, is a :class:`UsageError` naming its flag."""
    adaptive = done["runs"].adaptive
    if adaptive and "min_pass_rate" not in where:
        raise UsageError(
            f"--runs {done['runs'].spec}: adaptive repeats decide against the gate; give --min-pass-rate R (e.g. 0.8)"
        )
    for name in ("alpha", "delta"):
        if not adaptive and where.get(name) == OPTIONS[name].flag:
            raise UsageError(
                f"--{name} {done[name]:g}: it tunes adaptive repeats, which this run does not make; give it with --runs auto or --runs MIN..MAX"
            )
    if done["otlp_content"] and done["otlp"] is None:
        raise UsageError(
            "--otlp-content: it puts the messages in the traces sent to an OTLP endpoint, and none is set; "
            "give --otlp URL (or set [farm].otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)"
        )
    if done["dry_run"]:  # it runs no case: what only a run writes or decides would be dropped without a word
        for name in ("junit", "html", "update_golden", "reporter"):
            if where.get(name) == OPTIONS[name].flag:
                raise UsageError(f"{OPTIONS[name].flag}: --dry-run runs no case, so nothing comes of it; drop one of the two")
    if done["on_missing_input"] not in ("skip", "fail"):
        raise UsageError(f"--on-missing-input: '{done['on_missing_input']}' is not one of: skip, fail")
    if done["simulator_failures"] not in ("failure", "error"):
        raise UsageError(
            f"{where.get('simulator_failures', '--simulator-failures')}: '{done['simulator_failures']}' is not one of: failure, error"
        )


def _same_inputs(given: tuple[str, ...], previous: RunInfo, resume: str | Path) -> tuple[str, ...]:
    """``-i`` of a resume, as the run names it: a resume continues the run it names, so ``-i`` may
    name its inputs again (a file by another path from here is the same file, and takes the run's
    name for it, which its finished cases are kept under), never others, which would add cases the
    run was not started with."""
    from farm.inputkind import input_kind
    from farm.inputs import input_text

    def key(value: str, folder: str | None) -> str:
        return str((Path(folder or ".") / value).resolve()) if input_kind(value) == "file" else value

    recorded = previous.inputs or ([previous.input] if previous.input else [])
    theirs = {key(value, previous.cwd): found for value, found in zip(recorded, recorded_input(previous) or [], strict=True)}
    for value in given:
        if key(value, None) not in theirs:
            raise UsageError(
                f"-i {value}: --resume {resume} continues a run of {input_text(recorded)}; "
                "give no -i (or that input) to finish it, and start a new run for another suite"
            )
    return tuple(theirs[key(value, None)] for value in given)


def _otlp(given: str | None, where: dict[str, str]) -> str | None:
    """The endpoint a run's traces go to: the one given, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` (as
    every OpenTelemetry SDK reads it); a base URL, to which ``/v1/traces`` and ``/v1/logs`` are added."""
    import os

    from farm.config import otlp_problem

    if given is None and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        given, where["otlp"] = os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], "OTEL_EXPORTER_OTLP_ENDPOINT"
    if not given:
        return None
    problem = otlp_problem(str(given))
    if problem:
        raise UsageError(f"{where.get('otlp', '--otlp')}: {problem}")
    return str(given).strip().rstrip("/").removesuffix("/v1/traces")


def locate(request: RunRequest, previous: RunInfo | None) -> FarmConfig:
    """The run's config: the one given, else the resumed run's own ``farm.toml`` (wherever the
    resume starts), else the one found from the input. No input at all is a :class:`UsageError`."""
    input = _pick(request, "input", previous, None, {})
    if not input:
        raise UsageError(NO_INPUT)
    return farm_config(_pick(request, "config", previous, None, {}), input)


def farm_config(config: str | Path | FarmConfig | None, input: str | Sequence[str]) -> FarmConfig:
    """``config`` itself, else the ``farm.toml`` it names, else the one found from ``input`` (its first file)."""
    from farm.config import FarmConfig, find_config, load_config
    from farm.inputs import input_path

    if isinstance(config, FarmConfig):
        return config
    return load_config(find_config(str(config) if config is not None else None, input_path(input)))


def _pick(request: RunRequest, name: str, previous: RunInfo | None, farm: FarmSettings | None, where: dict[str, str]) -> Any:
    """``name``'s value by the table's precedence; ``where`` learns which gave it (for a message)."""
    option = OPTIONS[name]
    sources = [
        (f"{option.flag}", lambda: getattr(request, name)),
        (f"{RUN_JSON}'s options.{name}", lambda: option.resumed(previous) if option.resumed and previous else None),
        (f"farm.toml: [farm].{option.farm}", lambda: getattr(farm, option.farm) if option.farm and farm else None),
    ]
    for source, value in sources:
        found = value()
        if found is not None and found != "":  # an empty string names nothing, as no value
            where[name] = source
            return found
    return option.default


def seconds(flag: str, value: str | float) -> float:
    """``value`` (``30s``, ``2m`` or a number) in seconds; a bad one is a usage error naming ``flag``."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None
