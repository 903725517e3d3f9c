"""The public Python API: :func:`run` does everything ``farm test`` does, and
:func:`rescore` (:mod:`farm._run.rescoring`) what ``farm rescore`` does.

It finds the config, resolves the agent's defaults (``tool_mocks``,
``input_tools``), sizes ``parallel`` from the connector's limits, picks the
engine, resumes, writes the JSONL, Parquet and extra reports, and returns a
:class:`RunResult`. The CLI parses options and calls it; a notebook calls it
the same way, and it works there too although an event loop is running::

    import farm
    result = farm.run("suite.jsonl", config="farm.toml", engine="local")
    result.exit_code, result.run_dir, result.summary.passed

Options left at None take the run's own value on ``resume``, else the farm's
(``[farm]``), else their default: one table, :data:`farm._run.request.OPTIONS`. A mistake in the input or the options raises
:class:`~farm.errors.FarmError` (one sentence) before anything runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rich.console import Console

from farm._run.rescoring import rescore
from farm._run.result import RunResult, new_run_id

if TYPE_CHECKING:
    from farm.config import FarmConfig

_T = TypeVar("_T")

__all__ = ["RunResult", "new_run_id", "rescore", "run", "run_async"]


def run(
    input: str | Sequence[str] | None = None,
    *,
    config: str | Path | FarmConfig | None = None,
    agent: str | Sequence[str] | None = None,
    engine: Literal["auto", "local", "ray"] | None = None,
    output: str | Path | None = None,
    connector: str | None = None,
    parallel: int | str | None = None,
    runs: int | str | None = None,
    timeout: str | float | None = None,
    turn_timeout: str | float | None = None,
    on_missing_input: Literal["skip", "fail"] | None = None,
    simulator: str | None = None,
    match: str | None = None,
    tags: list[str] | None = None,
    fail_fast: bool | None = None,
    dry_run: bool | None = None,
    resume: str | Path | None = None,
    address: str | None = None,
    interactive: bool | None = None,
    skip_interactive: bool | None = None,
    junit: str | Path | None = None,
    html: str | Path | None = None,
    json_events: bool | None = None,
    golden: str | Path | None = None,
    update_golden: str | Path | None = None,
    before: str | None = None,
    after: str | None = None,
    reporter: str | None = None,
    verbose: bool | None = None,
    console: Console | None = None,
    quiet: bool | None = None,
    command: list[str] | None = None,
    cache: bool | None = None,
    retries: int | str | None = None,
    max_cost: float | str | None = None,
    min_pass_rate: float | str | None = None,
    baseline: str | Path | None = None,
    retry_errors: bool | None = None,
    alpha: float | str | None = None,
    delta: float | str | None = None,
    attribute: bool | None = None,
    simulator_failures: str | None = None,
    otlp: str | None = None,
    otlp_content: bool | None = None,
    run: str | None = None,
    name: str | Sequence[str] | None = None,
    json: bool | None = None,
) -> RunResult:
    """Run a suite against an agent; the options are ``farm test``'s (docs/reference/cli.md). One left at
    None takes the resumed run's value, else ``[farm]``'s, else its default, as
    :data:`farm._run.request.OPTIONS` says for each (the keywords: :data:`RUN_KEYWORDS`)."""
    given = dict(locals())  # first: every keyword, and nothing else
    from farm._run.request import RunRequest
    from farm._run.running import run_request  # the run path loads when a run starts

    return run_request(RunRequest.of(given))


RUN_KEYWORDS = """\
- ``input``: a ``.jsonl``/``.json`` file, a folder of them, a glob, a message, ``agents:<id>?k=v``,
  ``scripts:<id>?k=v``, ``scripts.<module>`` (script tests) or ``-`` (stdin); or a list of
  suites, run in one run (:data:`farm.inputs.PATH_RULE` tells a path from a message).
- ``config``: a ``farm.toml`` path or a loaded :class:`~farm.config.FarmConfig`.
- ``agent``: the agent under test, or a list of agents (``-n A -n B``): every case runs on
  each, in one run, each result naming its ``agent``.
- ``engine``: ``local``, ``ray`` or ``auto``; ``match``: only cases whose id matches this regex (``--run``); ``tags``: only these tags.
- ``golden``: compare every case with its golden conversation in this folder (``--golden``).
- ``update_golden``: write every passed case's conversation to this folder instead (no comparing).
- ``console``: where the tree and the summary go; ``quiet`` (``-q``): one line per case that
  did not pass and the summary (``console=rich.console.Console(quiet=True)`` prints nothing).
- ``command``: what ``run.json`` records as the command line; ``cache``: False (``--no-cache``)
  sends every role call, none answered from the role cache.
- ``retries``: times a case that ended in an agent error or timeout runs again.
- ``max_cost``: USD after which nothing more is dispatched; what is in flight finishes, and
  ``resume`` with a larger budget runs the rest.
- ``min_pass_rate``: the share of its tries a case must pass; ``baseline``: a run folder, or
  ``last``, to compare with; the run fails its gate when significantly worse (:mod:`farm.gate`).
- ``retry_errors``: with ``resume``, run again the cases that ended in ``error`` or ``timeout``.
- ``runs``: a number of tries, or ``"auto"`` / ``"MIN..MAX"``: adaptive repeats, each case stopping
  once its pass rate is decided against ``min_pass_rate`` (required then) at error level ``alpha``
  with an indifference zone of ``delta`` (docs/adaptive.md).
- ``attribute``: a failed dynamic case that no simulator flag settles asks the attributor
  (``[farm].attributor``) whose failure it is; ``simulator_failures``: ``"error"`` makes a case
  blamed on the simulator an ``error`` of the simulator, not the agent's failure (docs/simulator.md).
- ``otlp``: an OTLP/HTTP endpoint (``http://127.0.0.1:4318``) each case run is sent to as a trace,
  with its verdicts; ``otlp_content``: the turns' messages too (docs/traces.md).
- ``run``, ``name``, ``json``: the CLI's names (``--run``, ``-n/--name``, ``--json``) of
  ``match``, ``agent`` and ``json_events``.
"""
"""What :func:`run`'s keywords take, beyond ``farm test --help``; :func:`run`'s docstring ends with it."""

run.__doc__ = f"{run.__doc__}\n\n{RUN_KEYWORDS}"


async def run_async(input: str | Sequence[str] | None = None, **options: Any) -> RunResult:
    """:func:`run` for ``await`` in async code: the run goes on in a thread, the loop stays free."""
    return await asyncio.to_thread(run, input, **options)
