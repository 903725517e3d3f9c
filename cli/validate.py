"""``farm validate FILE...``: check suites as ``farm test`` would before its first call, and
report every problem with file:line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from farm.errors import UsageError
    from farm.loaded import LoadedCase
    from farm.suite.loader import Suite

__all__ = ["validate"]


def validate(
    inputs: Annotated[
        list[str],
        typer.Argument(metavar="FILE", help="Suites as farm test's -i takes them: a .jsonl/.json file, a folder of them, a glob.", show_default=False),
    ],
    config: Annotated[str | None, typer.Option("--config", metavar="PATH", help="Path to farm.toml (default: ./farm.toml, else beside the file).")] = None,
    name: Annotated[
        list[str] | None, typer.Option("-n", "--name", metavar="AGENT", help="The agent under test, as farm test's -n (default: [farm].default_agent).")
    ] = None,
    simulator: Annotated[str | None, typer.Option("--simulator", metavar="AGENT", help="The default simulator the run would use.")] = None,
    golden: Annotated[str | None, typer.Option("--golden", metavar="DIR", help="The golden folder the run would use, as farm test's --golden (default: [farm].golden_dir).")] = None,
) -> None:
    """Check suites deeply, as farm test does before its first call (fields, regex, JSONPath, every
    agent and script they name, the config, the agents' entries); exit 2 on any problem."""
    from farm.errors import ConfigError, FarmError, InputError

    console = Console(highlight=False, soft_wrap=True, emoji=False)
    problems: list[str] = []
    warnings: list[str] = []
    valid = files = 0
    cases: list[LoadedCase] = []
    for value in inputs:  # each as `farm test -i VALUE` would run it
        try:
            suite, count, refused = _checked(value, config, name or [], simulator, golden)
        except (InputError, ConfigError) as exc:  # a farm.toml beside several files: its problems once
            problems.extend(p for p in exc.problems if p not in problems)
            continue
        except FarmError as exc:
            if str(exc) not in problems:
                problems.append(str(exc))
            continue
        if refused is not None and str(refused) not in problems:  # the config's, said once
            problems.append(str(refused))
        files += count
        problems.extend(suite.problems)
        warnings.extend(suite.warnings)
        valid += sum(1 for c in suite.cases if c.ok)
        cases += suite.cases
    if files and not problems:  # the files together, as farm test -i FILE... runs them
        from farm.suite.checks import check_cases
        from farm.suite.loader import Suite

        try:
            check_cases(Suite(cases, ", ".join(inputs)))
        except FarmError as exc:
            problems.append(str(exc))
    for problem in problems:
        console.print(Text.assemble(("error:", "red"), " ", problem))
    for warning in warnings:
        console.print(Text.assemble(("warning:", "yellow"), " ", warning))
    console.print(Text(f"{valid} valid case(s) in {files} file(s); {len(problems)} problem(s)"))
    raise typer.Exit(2 if problems else 0)


def _checked(value: str, config: str | None, agents: list[str], simulator: str | None, golden: str | None) -> tuple[Suite, int, UsageError | None]:
    """The suite ``value`` names, loaded and checked by :func:`~farm.suite.checks.check_before_run`
    (with the agent under test: ``agents``, else ``[farm].default_agent``), its file count, and
    what that check refused of the command or the config (an agent's entry that does not import):
    that is the config's problem, and the suite's cases are still checked and counted."""
    from pathlib import Path

    from farm.config import find_config, load_config
    from farm.errors import UsageError
    from farm.inputs import expand_inputs, input_path, load_inputs
    from farm.suite.checks import check_before_run, check_suite

    inputs = expand_inputs(value, flag="")
    if any(each.kind != "file" for each in inputs):
        raise UsageError(f"{value}: farm validate checks suite files; give a .jsonl/.json file, a folder of them or a glob")
    cfg = load_config(find_config(config, input_path(value)))
    suite = load_inputs(inputs, cfg, None)
    tested = agents or ([cfg.farm.default_agent] if cfg.farm.default_agent else [])
    try:
        check_before_run(suite, cfg, tested, simulator=simulator, max_cost=cfg.farm.max_cost, golden_dir=Path(golden) if golden else cfg.golden_dir)
    except UsageError as exc:
        check_suite(suite, cfg, default_simulator=simulator)  # again is harmless: what it marked stays marked
        return suite, len(inputs), exc
    return suite, len(inputs), None
