""":func:`rescore`, what ``farm rescore`` does: a suite's assertions judged again against the
conversations a run recorded, with no call to the agent under test or the simulator.

It reads the source run (its ``run.json`` and results JSONL, through :class:`farm.results.RunRecord`), resolves the suite (the
run's own or an edited copy) as :func:`farm.run` would, and runs it on the local engine
with every case replaying its recording (:mod:`farm.conversation.replay`). The result is a new run
folder, written as a run's is, whose ``run.json`` names the source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from farm.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from farm._run.result import RunResult
    from farm.config import FarmConfig
    from farm.results import CaseResult, CaseRunKey, RunRecord

__all__ = ["rescore"]


def rescore(
    run_dir: str | Path,
    input: str | Sequence[str] | None = None,
    *,
    config: str | Path | FarmConfig | None = None,
    output: str | Path | None = None,
    match: str | None = None,
    tags: list[str] | None = None,
    cache: bool | None = None,
    junit: str | Path | None = None,
    html: str | Path | None = None,
    json_events: bool | None = None,
    verbose: bool | None = None,
    console: Console | None = None,
    quiet: bool | None = None,
    command: list[str] | None = None,
) -> RunResult:
    """Re-evaluate a suite's assertions against the conversations recorded in ``run_dir``
    (``farm rescore``, docs/reference/cli.md): nothing is sent to the agent under test or the simulator.

    - ``input``: the suite, by default the run's own (for generated cases, the run's
      ``generated.jsonl``); an edited copy re-judges the same conversations with its
      assertions, checkpoints and ``final_assertions``.
    - ``config``: as for :func:`~farm.api.run`; by default the run's own ``farm.toml`` (where
      ``run.json`` says it was), else found from the input as ``farm test`` does.
    - ``match``, ``tags``: the cases to rescore (``--run``, ``--tag``); each, when not given,
      is the source run's own, so a run of a selection is rescored as that selection.
    - ``cache``: whether role calls (the validators of ``agent`` assertions) may be answered
      from the role cache; ``farm rescore --no-cache`` sets it False.

    The result is a new run folder beside the source, written as ``farm test`` writes a run (its
    ``run.json`` with ``rescored_from``), so ``farm report OLD NEW`` compares the two; it uses
    the role cache there. A case that cannot be rescored (its inputs changed, or it needs more
    than was recorded) is an ``error`` with ``rescorable: false`` (:mod:`farm.conversation.replay`).
    """
    from farm._run import running
    from farm._run.phases import Rescoring
    from farm._run.request import RunRequest, resolve
    from farm.conversation.replay import Replay
    from farm.results._folder import RUN_JSON

    run = _source(run_dir)
    previous, source = run.info, run.path
    input_value = _input(run, input)
    cfg = _config(run, config, input_value)
    # The conversations are the run's, so what shaped them is too (its options, resolved as a
    # resume resolves them); the selection (by default the run's own) and the cache are the
    # rescore's, and nothing is retried, recorded as golden or budgeted: no agent is called.
    interactive = previous.options.interactive  # a person's recorded answers are replayed
    selected = {"match": match, "tags": tags, "cache": cache, "retries": 0, "interactive": interactive}
    shown = {"junit": junit, "html": html, "json_events": json_events, "console": console, "verbose": verbose, "quiet": quiet}
    command = command or ["farm.rescore", str(run_dir), *([input] if isinstance(input, str) else input or [])]
    given = RunRequest.of({"input": input_value, "config": config, "command": command, **selected, **shown})
    options = resolve(given, previous, cfg)
    if not options.agents:
        raise UsageError(f"{source / RUN_JSON} names no agent and the config sets no [farm].default_agent: there is no agent to rescore the run of")
    # the run's gate, no baseline; -o alone (not the source run's results file); on this process's engine
    options = replace(options, update_golden=None, max_cost=None, baseline=None, output=output, engine="local", resume=None)
    rescoring = Rescoring(source, previous, Replay(_recorded(run, options.agents[0]), previous.run_id or source.name))
    return running.execute_run(running.plan_run(running.prepare_run(options, cfg, None, rescoring)))


def _source(run_dir: str | Path) -> RunRecord:
    """The run to rescore, whole: a folder ``farm test`` wrote, its ``run.json`` read without a problem."""
    from farm.results import RunRecord
    from farm.results._folder import RUN_JSON

    source = Path(run_dir).absolute()
    if not source.exists():
        raise UsageError(f"{run_dir} does not exist (give a run folder that farm test wrote, e.g. farm-results/<run_id>)")
    run = RunRecord(source)
    if not source.is_dir() or not run.has_info:
        raise UsageError(f"{run_dir} is not a run folder: it has no {RUN_JSON} (give a folder that farm test wrote, e.g. farm-results/<run_id>)")
    if run.problems:  # the rescore resolves its options from run.json: it must be whole
        raise UsageError(f"Cannot rescore {run_dir}, as {run.problems[0]}")
    return run


def _input(run: RunRecord, input: str | Sequence[str] | None) -> list[str]:
    """The suites to judge with: ``input``, else the run's own (for generated cases, the ones it generated)."""
    from farm._run.request import recorded_input
    from farm.results._folder import GENERATED_JSONL, RUN_JSON

    source = run.path
    given = [input] if isinstance(input, str) else list(input or [])
    values = given or recorded_input(run.info) or []
    if not values:
        raise UsageError(f"{source / RUN_JSON} names no input; give the suite with -i/--input")
    if not given and values[0].startswith(("agents:", "scripts:")) and (source / GENERATED_JSONL).is_file():
        values = [str(source / GENERATED_JSONL)]  # the cases the run generated, as it ran them
    unread = next((value for value in values if value == "-" or value.startswith("agents:")), None)
    if not given and unread is not None:
        raise UsageError(f"the run's input ({unread}) cannot be read again; give the suite with -i/--input (farm test --dry-run -o FILE writes it)")
    return values


def _config(run: RunRecord, config: str | Path | FarmConfig | None, input_value: Sequence[str]) -> FarmConfig:
    """The config (as given, else the run's own ``farm.toml``), its ``results_dir`` the run's folder's parent."""
    from farm._run.request import farm_config, recorded_config

    # The run's folder and role cache are where the run wrote them, whatever results_dir its config
    # names (farm demo and a moved run write elsewhere): the rescore's go beside them.
    loaded = farm_config(config or recorded_config(run.info), input_value)
    return loaded.model_copy(update={"farm": loaded.farm.model_copy(update={"results_dir": str(run.path.parent)})})


def _recorded(run: RunRecord, agent: str) -> dict[CaseRunKey, CaseResult]:
    """The source run's results by :class:`~farm.results.CaseRunKey` (:meth:`CaseResult.run_key`),
    the first record of each; from
    its ``results.jsonl``, else from the path its ``run.json`` names (``-o``). ``agent``: the agent of
    a result that names none. A line that is not a case result is a usage error: a rescore that
    passed it over would judge less than the run ran."""
    if run.jsonl is None:
        named = f" nor at {run.info.results}" if run.info.results else ""
        from farm.results._folder import RESULTS_JSONL

        raise UsageError(f"{run.path} holds no results to rescore: there is no {RESULTS_JSONL} in it{named}")
    recorded: dict[CaseRunKey, CaseResult] = {}
    for result in run.results():
        recorded.setdefault(result.run_key(agent), result)
    if run.problems:
        raise UsageError(f"Cannot rescore {run.path}: {run.problems[-1]}")
    return recorded
