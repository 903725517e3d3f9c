"""What ``-i/--input`` names (docs/reference/cli.md), resolved to a :class:`~farm.suite.loader.Suite`.

=======================  ===============================================
``suite.jsonl``          a JSONL or JSON file
``suites/``              every ``*.jsonl`` in the folder, sorted
``suites/*.jsonl``       every suite file the glob matches, sorted
``-``                    cases as JSONL on stdin
``agents:<id>?k=v``      a generator agent writes the cases
``scripts:<id>?k=v``     a generator script writes the cases
``scripts.<module>``     script tests: each ``test_*(t, ctx)`` is a case
anything else            a direct message: one single-turn case
=======================  ===============================================

A value that looks like a path (:data:`PATH_RULE`) is always read as one, so a mistyped suite
path is an error, never a message sent to the agent. ``-i`` given several times runs every
suite in one run, in order. :func:`expand_inputs` turns the values into the run's inputs, and
:func:`load_inputs` loads them: ``farm test``, ``--dry-run``, ``farm validate``, a resume and a
rescore all go through them.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO
from urllib.parse import parse_qsl

from farm.errors import UsageError
from farm.suite.loader import FILE_SUFFIXES, SMALL_SUITE, Suite, load_file, load_message, load_stdin
from farm.wording import shown

if TYPE_CHECKING:  # the roles (and the agents' clients beneath them) load with a generator: farm validate needs neither
    from farm.config import AgentConfig, FarmConfig
    from farm.roles.cache import RoleCache

__all__ = ["PATH_RULE", "Input", "expand_inputs", "generator_metadata", "input_kind", "input_path", "input_text", "load_inputs", "looks_like_path", "resolve_input", "typed_query"]

PATH_RULE = (
    "A value that looks like a path is read as one: an existing file or folder, a glob (* or [...]), "
    "or a value with no whitespace that has a path separator or a file extension; "
    "a folder runs every *.jsonl in it, and a path that does not exist is an error. "
    "Anything else is a message: one single-turn case."
)
"""How ``-i`` tells a path from a message, as ``farm test --help`` and docs/guide.md say it."""

InputKind = Literal["file", "message", "stdin", "generator", "script-tests"]


@dataclass(frozen=True)
class Input:
    """One input of a run: a suite file (found in a folder or by a glob, or named), a message,
    stdin, a generator or script tests."""

    value: str
    """The file's path as given or found (relative stays relative), or the ``-i`` value itself."""
    kind: InputKind

    @property
    def alone(self) -> bool:
        """An input that is the run's only one: stdin, a generator, script tests."""
        return self.kind in ("stdin", "generator", "script-tests")


_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_GLOB = re.compile(r"\*|\[[^\]]+\]")


def _exists(value: str) -> bool:
    try:
        return Path(value).exists()
    except (OSError, ValueError):  # a name too long, a NUL byte: no such path
        return False


def looks_like_path(value: str) -> bool:
    """Whether ``-i value`` names a path (:data:`PATH_RULE`) rather than a message."""
    if not value:
        return False
    if _exists(value):
        return True
    if any(ch.isspace() for ch in value):
        return False
    return "/" in value or os.sep in value or bool(_EXTENSION.search(value)) or bool(_GLOB.search(value))


def input_kind(value: str) -> InputKind:
    """What one ``-i`` value is: a path (``file``: a file, a folder or a glob), a message, stdin, a generator or script tests."""
    if value == "-":
        return "stdin"
    if value.startswith(("agents:", "scripts:")):
        return "generator"
    if value.startswith("scripts."):
        return "script-tests"
    return "file" if looks_like_path(value) else "message"


def expand_inputs(values: str | Sequence[str], flag: str = "-i ") -> list[Input]:
    """The run's inputs, in order, from the ``-i`` values: a folder becomes its ``*.jsonl`` files
    and a glob its suite files (each sorted), a file named twice runs once. A path that does not
    exist, a folder or glob with no suite file, or stdin, a generator or script tests given
    beside other inputs is a :class:`UsageError` naming the value after ``flag``, before anything is loaded."""
    given = [values] if isinstance(values, str) else list(values)
    out: list[Input] = []
    seen: set[Path] = set()
    for value in given:
        kind = input_kind(value)
        found = [Input(path, "file") for path in _files(value, flag)] if kind == "file" else [Input(value, kind)]
        for each in found:
            if each.kind == "file":
                key = Path(each.value).resolve()
                if key in seen:
                    continue
                seen.add(key)
            out.append(each)
    alone = next((each for each in out if each.alone), None)
    if alone is not None and len(out) > 1:
        raise UsageError(f"{flag}{alone.value}: {_ALONE[alone.kind]} runs on its own: give it as the only -i")
    return out


_ALONE = {"stdin": "stdin (-)", "generator": "a generator", "script-tests": "a module of script tests"}


def _files(value: str, flag: str) -> list[str]:
    """The suite files ``value`` names: itself, a folder's ``*.jsonl``, or a glob's matches."""
    path = Path(value)
    if path.is_dir():
        files = sorted(str(path / child.name) for child in path.iterdir() if child.suffix == ".jsonl" and child.is_file())
        if not files:
            raise UsageError(f"{flag}{shown(value)}: the folder has no *.jsonl file")
        return files
    if _exists(value):
        return [value]
    if _GLOB.search(value):
        files = sorted(match for match in glob.glob(value, recursive=True) if match.endswith(FILE_SUFFIXES) and Path(match).is_file())
        if not files:
            raise UsageError(f"{flag}{shown(value)}: no .jsonl or .json file matches the pattern")
        return files
    raise UsageError(f"{flag}{shown(value)}: no such file or folder{_nearest_path(value)}; a value that looks like a path is read as one (quote a message with a space in it)")


def _nearest_path(value: str) -> str:
    """`` (did you mean 'suites/smoke.jsonl'?)``: the closest suite file or folder near ``value``,
    written as ``value`` is (relative stays relative), by its whole path or by its name."""
    from difflib import SequenceMatcher

    wanted = Path(value)
    folder = wanted.parent
    while str(folder) not in (".", "/") and not folder.is_dir():
        folder = folder.parent
    candidates: list[Path] = []
    for entry in _entries(folder):
        candidates.append(entry)
        if entry.is_dir():
            candidates += [child for child in _entries(entry) if child.is_file()]

    def score(path: Path) -> float:
        whole = SequenceMatcher(None, str(wanted), str(path)).ratio()
        name = SequenceMatcher(None, wanted.name, path.name).ratio()
        return max(whole - 0.75, name - 0.88)

    best = max(candidates, key=score, default=None)
    return f" (did you mean '{shown(str(best))}'?)" if best is not None and score(best) >= 0 else ""


def _entries(folder: Path, most: int = 500) -> list[Path]:
    """The suite files and folders in ``folder`` (not hidden), at most ``most``."""
    out: list[Path] = []
    try:
        for child in folder.iterdir():
            if child.name.startswith("."):
                continue
            if child.is_dir() or child.suffix in FILE_SUFFIXES:
                out.append(child if str(folder) != "." else Path(child.name))
            if len(out) >= most:
                break
    except OSError:
        pass
    return out


def input_text(values: str | Sequence[str]) -> str:
    """The ``-i`` values as the run names them in one line: the value when one, else them joined."""
    return values if isinstance(values, str) else ", ".join(values)


def typed_query(query: str) -> dict[str, Any]:
    """``count=3&focus=edge-cases&strict=true`` with values typed: int, float, bool, string; a key
    given more than once (``focus=a&focus=b``) is a list."""
    out: dict[str, Any] = {}
    for key, raw in parse_qsl(query, keep_blank_values=True):
        value = _typed(raw)
        if key in out:
            before = out[key]
            out[key] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            out[key] = value
    return out


def _typed(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def input_path(values: str | Sequence[str]) -> Path | None:
    """The first input's file, when it names one (for finding ``farm.toml`` beside it); a folder's
    own path, and a glob's up to its first pattern."""
    for value in [values] if isinstance(values, str) else values:
        if input_kind(value) != "file":
            continue
        match = _GLOB.search(value)
        path = Path(value[: match.start()] or ".") if match else Path(value)
        return path / "_" if path.is_dir() else path  # farm.toml is looked for from the file's folder
    return None


def generator_metadata(config: FarmConfig, agent_id: str | None, params: dict[str, Any]) -> dict[str, Any]:
    """What a generator is told: the target's id, description and tools, plus the query."""
    meta: dict[str, Any] = {"test_mode": "generator", "count": 5, "focus": "happy-path", "complexity": "medium"}
    if agent_id:
        meta["target_agent"] = agent_id
        agent = config.agents.get(agent_id)
        if agent is not None:
            meta["target_description"] = agent.description or ""
            meta["target_tools"] = [_tool_name(t) for t in agent.tools]
    meta.update(params)
    return meta


def _tool_name(tool: Any) -> Any:
    if isinstance(tool, dict):
        return tool.get("function", {}).get("name") or tool.get("name") or tool
    return tool


def resolve_input(
    value: str, config: FarmConfig, agent_id: str | None, stdin: TextIO | None = None, compact: bool = False, cache: RoleCache | None = None
) -> Suite:
    """The suite ``value`` names; ``compact`` keeps the cases of a file or stdin as JSON once there
    are more than :data:`~farm.suite.loader.SMALL_SUITE` (for big runs);
    ``cache``: the role cache a generator's whole generation is kept in (its batch calls go
    through the engine's role players). A generator (``agents:``, ``scripts:``) gives a suite with
    no cases yet and its :class:`~farm.roles.generation.CaseStream` as ``stream``."""
    if value == "-":
        return load_stdin(stdin or sys.stdin, compact, SMALL_SUITE)
    if value.startswith("agents:"):
        return _generated_by_agent(value, config, agent_id, cache)
    if value.startswith("scripts:"):
        return _generated_by_script(value, config, agent_id)
    if value.startswith("scripts."):
        from farm.roles.scripttests import load_script_tests

        return load_script_tests(value.removeprefix("scripts."), config)
    if input_kind(value) == "file":
        return load_file(Path(value), display=value, compact=compact, small=SMALL_SUITE)
    return load_message(value)


def load_inputs(
    inputs: Sequence[Input], config: FarmConfig, agent_id: str | None, stdin: TextIO | None = None, compact: bool = False, cache: RoleCache | None = None
) -> Suite:
    """Every suite of ``inputs`` (as :func:`expand_inputs` made them), as one suite in their order.
    A case id may repeat across suites: a case is named by its suite and id
    (:func:`~farm.results._suites.suite_of`), and every suite may have its ``greet``. An id repeated
    within one suite is a problem of the later case, as the loader finds it in a file; so is a
    second direct message (both are the case ``message`` of the suite ``<message>``)."""
    if len(inputs) == 1:
        return resolve_input(inputs[0].value, config, agent_id, stdin, compact, cache)
    from farm.results._suites import suite_of

    suites = [resolve_input(each.value, config, agent_id, stdin, compact, cache) for each in inputs]
    first: dict[tuple[str, str], str] = {}
    cases = []
    for suite in suites:
        for loaded in suite.cases:
            key = (suite_of(loaded.source), loaded.id)
            if key in first:
                loaded.fail([f"field 'id': duplicate id '{shown(loaded.id)}' (first at {shown(first[key])})"])
                loaded.id = f"{loaded.id}@{loaded.source}"
            else:
                first[key] = loaded.source
            cases.append(loaded)
    return Suite(cases, input_text([each.value for each in inputs]))


def _split(value: str, prefix: str) -> tuple[str, dict[str, Any]]:
    ref, _, query = value.removeprefix(prefix).partition("?")
    if not ref:
        raise UsageError(f"-i {value}: name the {prefix[:-1]} id after '{prefix}'")
    return ref, typed_query(query)


def _placeholders(config: FarmConfig, generator: AgentConfig) -> set[str]:
    """The ``{name}`` placeholders of the generator's prompt (its file's, else the built-in one)."""
    from farm.roles.player import PLACEHOLDERS, PROMPTS, RolePlayer, placeholders
    try:
        text = RolePlayer.prompt_from(generator.prompt, config.base_dir) or PROMPTS["generator"]
    except OSError:
        text = PROMPTS["generator"]
    return placeholders(text) | PLACEHOLDERS["generator"]


def _generated_by_agent(value: str, config: FarmConfig, agent_id: str | None, cache: RoleCache | None = None) -> Suite:
    from farm.roles.generation import CaseStream, check_query
    from farm.roles.player import player_of, writes_prompt

    generator_id, query = _split(value, "agents:")
    generator = config.agent(generator_id)  # a UsageError naming the configured agents
    prompt, strict = _placeholders(config, generator), writes_prompt(player_of(config, generator))
    check_query(f"{config.path or 'farm.toml'}: agents.{generator_id}.generate", generator.generate, prompt, strict)
    check_query(f"-i agents:{generator_id}", query, {*generator.generate, *prompt}, strict)
    params = {**generator.generate, **query}
    stream = CaseStream(f"agents:{generator_id}", config, params, generator_metadata(config, agent_id, params), agent_id=generator_id, cache=cache)
    return Suite([], f"agents:{generator_id} ({stream.asked} cases to generate)", stream=stream)


def _generated_by_script(value: str, config: FarmConfig, agent_id: str | None) -> Suite:
    from farm.roles.generation import CaseStream, check_query
    from farm.scripts import ScriptResolver

    ref, params = _split(value, "scripts:")
    fn = ScriptResolver(config.scripts_dir).resolve(ref)
    check_query(f"-i scripts:{ref}", params, set(), strict=False)
    stream = CaseStream(f"scripts:{ref}", config, params, generator_metadata(config, agent_id, params), script=fn)
    return Suite([], f"scripts:{ref} ({stream.asked} cases to generate)", stream=stream)
