"""``farm test``: run a suite against an agent (docs/reference/cli.md). Parses the options and calls :func:`farm.run`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from farm.cli.options import ConfigPath, HTMLPath, JSONEvents, JUnitPath, Match, Quiet, Verbose

from farm.errors import FarmError

__all__ = ["INPUT_HELP", "test"]

INPUT_HELP = (
    "A .jsonl/.json file, a folder of them, a glob, a message, agents:<id>?k=v, scripts:<id>?k=v, scripts.<module>, or - for stdin; "
    "repeat it to run several suites in one run. "
    "A value that looks like a path is read as one: an existing file or folder, a glob (* or [...]), "
    "or a value with no whitespace that has a path separator or a file extension; "
    "a folder runs every *.jsonl in it, and a path that does not exist is an error. "
    "Anything else is a message: one single-turn case (a one-word message that is the name of a suite file "
    "here or a folder down is an error too)."
)
"""``-i``'s help: what it takes, then :data:`farm.inputs.PATH_RULE` (a test holds the two together)."""


def test(
    input: Annotated[list[str] | None, typer.Option("-i", "--input", metavar="INPUT", help=INPUT_HELP)] = None,
    name: Annotated[
        list[str] | None,
        typer.Option(
            "-n",
            "--name",
            metavar="AGENT",
            help="The agent under test (default: [farm].default_agent); repeat it to run every case on each agent.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="PATH", help="Results JSONL path (default: <results_dir>/<run_id>/results.jsonl)."
        ),
    ] = None,
    connector: Annotated[
        str | None, typer.Option("-c", "--connector", metavar="NAME", help="Override the target agent's connector.")
    ] = None,
    verbose: Verbose = None,
    quiet: Quiet = None,
    interactive: Annotated[
        bool | None, typer.Option("--interactive", help="A person answers on this terminal when the agent awaits input.")
    ] = None,
    skip_interactive: Annotated[
        bool | None, typer.Option("--skip-interactive", help="Never wait for a person (default when stdin is not a terminal).")
    ] = None,
    on_missing_input: Annotated[
        str | None,
        typer.Option(
            "--on-missing-input",
            metavar="skip|fail",
            help="skip or fail when the agent awaits input and nothing can answer (default skip).",
        ),
    ] = None,
    simulator: Annotated[
        str | None, typer.Option("--simulator", metavar="AGENT", help="Default simulator agent id for dynamic cases.")
    ] = None,
    timeout: Annotated[
        str | None, typer.Option("--timeout", metavar="DURATION", help="Per-case timeout (30s, 2m, 1h; default 5m).")
    ] = None,
    turn_timeout: Annotated[
        str | None, typer.Option("--turn-timeout", metavar="DURATION", help="Per-turn timeout (default 2m).")
    ] = None,
    parallel: Annotated[
        str | None,
        typer.Option("--parallel", metavar="N", help="Max conversations in flight (default: from the connector's limits)."),
    ] = None,
    fail_fast: Annotated[
        bool | None, typer.Option("-x", "--fail-fast", help="Stop dispatching after the first failed case.")
    ] = None,
    dry_run: Annotated[
        bool | None,
        typer.Option("--dry-run", help="Load and validate the cases, print them (and write them with -o); run nothing."),
    ] = None,
    runs: Annotated[
        str | None,
        typer.Option(
            "--runs",
            metavar="N|auto|MIN..MAX",
            help="Run every case N times (stability; default 1); auto (2..10) or MIN..MAX: stop each case once its pass rate is decided against --min-pass-rate.",
        ),
    ] = None,
    run: Match = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", metavar="TAG", help="Only cases carrying this tag (repeatable).")
    ] = None,
    config: ConfigPath = None,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            metavar="ADDRESS",
            help="Ray cluster address (auto, ray://host:10001) for the ray engine; default: embedded local Ray.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine", metavar="local|ray|auto", help="local (this process), ray (Ray actors) or auto (default; [farm].engine)."
        ),
    ] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", metavar="RUN_DIR", help="Continue an interrupted run in this folder.")
    ] = None,
    retry_errors: Annotated[
        bool | None,
        typer.Option("--retry-errors", help="With --resume: also run again the cases that ended in error or timeout."),
    ] = None,
    attribute: Annotated[
        bool | None,
        typer.Option(
            "--attribute",
            help="Ask the attributor ([farm].attributor) whose failure a failed dynamic case is, when no simulator flag settles it (default: [farm].attribute).",
        ),
    ] = None,
    simulator_failures: Annotated[
        str | None,
        typer.Option(
            "--simulator-failures",
            metavar="failure|error",
            help="A failed case blamed on the simulator is a failure (default) or an error of the farm ([farm].simulator_failures).",
        ),
    ] = None,
    otlp: Annotated[
        str | None,
        typer.Option(
            "--otlp",
            metavar="URL",
            help="Send each case run as a trace, with its verdicts, to this OTLP/HTTP endpoint (default: [farm].otlp_endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT).",
        ),
    ] = None,
    otlp_content: Annotated[
        bool | None,
        typer.Option(
            "--otlp-content", help="With --otlp: the turn spans carry the messages' content (off: only sizes, models, usage)."
        ),
    ] = None,
    min_pass_rate: Annotated[
        str | None,
        typer.Option(
            "--min-pass-rate",
            metavar="R",
            help="A repeated case passes its gate when at least R (0 < R <= 1) of its tries passed (default: [farm].min_pass_rate, else 1.0).",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="RUN_DIR|last",
            help="Fail the gate when significantly worse than this earlier run (last: the latest finished run of the same input).",
        ),
    ] = None,
    junit: JUnitPath = None,
    html: HTMLPath = None,
    json_events: JSONEvents = None,
    golden: Annotated[
        Path | None,
        typer.Option(
            "--golden",
            metavar="DIR",
            help="Compare every case's conversation with its golden one in DIR (default: cases that set 'golden', with [farm].golden_dir).",
        ),
    ] = None,
    update_golden: Annotated[
        Path | None,
        typer.Option("--update-golden", metavar="DIR", help="Write every passed case's conversation as its golden file in DIR."),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option(
            "--before", metavar="SCRIPT", help="Global hook run once before any case (scripts:<id>); its failure stops the run."
        ),
    ] = None,
    reporter_agent: Annotated[
        str | None,
        typer.Option("-r", "--reporter", metavar="AGENT", help="A reporter agent that writes report.md from the run's summary."),
    ] = None,
    after: Annotated[
        str | None,
        typer.Option(
            "--after", metavar="SCRIPT", help="Global hook run once after every case (scripts:<id>); it gets the summary."
        ),
    ] = None,
    no_cache: Annotated[
        bool | None,
        typer.Option(
            "--no-cache",
            help="Send every role call (simulator, validator, generator, reporter), and an agent under test's with cache = true; answer none from the role cache.",
        ),
    ] = None,
    retries: Annotated[
        str | None,
        typer.Option(
            "--retries",
            metavar="N",
            help="Run a case that ended in an agent error or timeout again, up to N more times (default 0).",
        ),
    ] = None,
    max_cost: Annotated[
        str | None,
        typer.Option(
            "--max-cost", metavar="USD", help="Dispatch nothing more once the run has spent this much (default: [farm].max_cost)."
        ),
    ] = None,
    alpha: Annotated[
        str | None,
        typer.Option("--alpha", metavar="A", help="With adaptive --runs: the error level of each decision (default 0.05)."),
    ] = None,
    delta: Annotated[
        str | None,
        typer.Option(
            "--delta", metavar="D", help="With adaptive --runs: the indifference zone around the gate, +-D (default 0.1)."
        ),
    ] = None,
) -> None:
    """Run test cases against an agent: in this process, or in parallel on Ray."""
    # The numbers (--parallel, --retries, --max-cost, --min-pass-rate, --alpha, --delta) are taken as
    # text, as --runs is: farm.run reads them and says a bad one in one sentence (farm/numbers.py).
    from farm.cli.app import fail

    import farm

    try:
        outcome = farm.run(
            input or None,
            config=config,
            agent=name,
            engine=engine,  # type: ignore[arg-type]  # checked by farm.run
            output=output,
            connector=connector,
            parallel=parallel,
            runs=runs,
            timeout=timeout,
            turn_timeout=turn_timeout,
            on_missing_input=on_missing_input,  # type: ignore[arg-type]
            simulator=simulator,
            match=run,
            tags=tag,
            fail_fast=fail_fast,
            dry_run=dry_run,
            resume=resume,
            address=address,
            interactive=interactive,
            skip_interactive=skip_interactive,
            junit=junit,
            html=html,
            json_events=json_events,
            golden=golden,
            update_golden=update_golden,
            before=before,
            after=after,
            reporter=reporter_agent,
            verbose=verbose,
            quiet=quiet,
            command=sys.argv,
            cache=False if no_cache else None,
            retries=retries,
            max_cost=max_cost,
            min_pass_rate=min_pass_rate,
            baseline=baseline,
            retry_errors=retry_errors,
            alpha=alpha,
            delta=delta,
            attribute=attribute,
            simulator_failures=simulator_failures,
            otlp=otlp,
            otlp_content=otlp_content,
        )
    except FarmError as exc:
        fail(exc)
    raise typer.Exit(outcome.exit_code)
