"""Golden conversations: record a passed case's conversation, compare later runs with it.

``farm test --update-golden DIR`` writes the conversation of every case that
passed to ``DIR/<suite>/<case>.json`` (:class:`GoldenRecorder`): per turn the
input, the reply, the tool calls (name, arguments, result) and whether the
agent awaited input. The file is sorted, indented JSON, so a changed golden
reads well in a code review. ``<suite>`` is the suite file's name without its
suffix and ``<case>`` the case id; both are reduced to ``[A-Za-z0-9._-]`` with
a short hash of the original when anything had to change, so an id with ``/``,
spaces or any other character stays a single file inside ``DIR``. A case id may
repeat across a run's suites, and each suite's case has its own file: two suites
of one name (``x/smoke.jsonl`` and ``y/smoke.jsonl``) each take as many of their
folders as tell them apart (``DIR/x/smoke/<case>.json``, :func:`golden_folders`).

A run with ``--golden DIR`` (every case) or ``[farm].golden_dir`` (the cases
that set ``golden``) compares each conversation with its golden one
(:func:`attach` on the driver, :func:`compare` where the case ran). Tool calls
(names and arguments), ``awaiting_input``, the number of turns and replies that
are JSON are compared exactly; other reply text by the case's
:class:`~farm.cases.GoldenRule`: ``exact``, ``similar`` (a difflib ratio of at
least ``threshold``) or ``judge`` (the validator decides whether the reply says
the same). Each compared turn gets one ``golden`` assertion result; a different
number of turns, or a missing golden file, is a ``golden`` final assertion.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shlex
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Any

from pydantic import ValidationError

from farm.assertions import AssertionEnv, Outcome, Subject
from farm.cases import AssertionSpec, GoldenRule
from farm.conversation.goldenfile import GOLDEN_FORMAT, GoldenCheck, GoldenConversation, GoldenTurn, suite_file
from farm.errors import UsageError
from farm.excerpts import clip
from farm.files import atomic_file
from farm.jsontext import NO_JSON, json_value, pretty_json, whole_json
from farm.loaded import LoadedCase
from farm.results import AssertionResult, CaseResult, Status, TurnResult
from farm.results._suites import suite_of
from farm.suite.loader import FILE_SUFFIXES

__all__ = [
    "GoldenRecorder",
    "attach",
    "check_folder",
    "compare",
    "golden_folders",
    "golden_path",
    "safe_name",
    "write_golden",
]

#: Longest file or folder name made from an id, before its hash.
NAME_LIMIT = 80


# -- where a case's golden file is --------------------------------------------------------------


def safe_name(text: str) -> str:
    """``text`` as one file name: ``[A-Za-z0-9._-]`` only, never hidden, never ``..``; when
    anything changed (case included, for case-insensitive file systems), a hash of ``text``
    follows, so two ids never share a file."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:NAME_LIMIT]
    if cleaned and cleaned == text and cleaned == text.lower():
        return cleaned
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{cleaned or 'case'}-{digest}"


def _without_suffix(name: str) -> str:
    for suffix in FILE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def golden_folders(sources: Iterable[str | None]) -> dict[str, str]:
    """The folders of the golden files of the suites of one run's case ``sources`` that share their
    name with another of its suites (``x/smoke.jsonl``, ``y/smoke.jsonl``), by suite
    (:func:`~farm.results._suites.suite_of`): as many of each one's last folders as tell them apart
    (``x/smoke``, ``y/smoke``). Any other suite's folder is its file's name (:func:`golden_path`)."""
    by_name: dict[str, dict[str, tuple[str, ...]]] = {}
    for source in sources:
        suite = suite_of(source)
        name = _without_suffix(suite_file(source) or "suite")
        by_name.setdefault(name, {})[suite] = PurePath(_without_suffix(suite)).parts
    out: dict[str, str] = {}
    for name, suites in by_name.items():
        if len(suites) == 1:
            continue
        last = 1
        while last < max(map(len, suites.values())) and len({parts[-last:] for parts in suites.values()}) < len(suites):
            last += 1
        out.update({suite: "/".join(part for part in parts[-last:] if part not in ("/", "..")) or name for suite, parts in suites.items()})
    return out


def golden_path(folder: Path, case_id: str, source: str | None, suite_folder: str | None = None) -> Path:
    """``folder/<suite>/<case>.json``: always inside ``folder``, whatever the id holds.
    ``suite_folder``: the suite's folder where the run has two suites of its name (:func:`golden_folders`)."""
    suite = suite_folder or _without_suffix(suite_file(source) or "suite")
    path = folder.joinpath(*(safe_name(part.strip("<>")) for part in suite.split("/"))) / (safe_name(case_id) + ".json")
    if folder.resolve() not in path.resolve().parents:  # safe_name makes this impossible; a guard all the same
        raise UsageError(f"golden file for case '{case_id}' would leave {folder}")
    return path


# -- writing ---------------------------------------------------------------------------------------


def write_golden(folder: Path, result: CaseResult, suite_folder: str | None = None) -> Path:
    """Write ``result``'s conversation as its golden file, atomically (a reader never sees half a file)."""
    path = golden_path(folder, result.id, result.source, suite_folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, fsync=False) as out:
        out.write(GoldenConversation.from_result(result).to_text())
    return path


class GoldenRecorder:
    """``--update-golden DIR``: writes the first passed run of every case (of each suite: an id
    may repeat across the run's suites), counts the rest. ``folders``: :func:`golden_folders` of
    the run's cases."""

    def __init__(self, folder: Path, folders: dict[str, str] | None = None):
        self.folder = folder
        self.folders = folders or {}
        self.written: set[tuple[str, str]] = set()
        self.seen: set[tuple[str, str]] = set()
        self.problems: list[str] = []

    def offer(self, result: CaseResult) -> None:
        """Write ``result``'s conversation if it passed and its case has none written yet."""
        case = (result.suite, result.id)
        self.seen.add(case)
        if Status(result.status) is not Status.PASSED or case in self.written:
            return
        try:
            write_golden(self.folder, result, self.folders.get(result.suite))
        except (OSError, UsageError) as exc:
            self.problems.append(f"golden file for case '{result.id}' not written: {exc}")
            return
        self.written.add(case)

    @property
    def not_passed(self) -> int:
        """Cases seen that never passed, so got no golden file."""
        return len(self.seen - self.written)

    def line(self) -> str:
        """``golden: 3 written, 1 not passed (in DIR)``."""
        return f"golden: {len(self.written)} written, {self.not_passed} not passed (in {self.folder})"


# -- comparing -------------------------------------------------------------------------------------


def attach(cases: Iterable[LoadedCase], folder: Path | None, *, every: bool, input: str) -> None:
    """Give every case to compare its :class:`GoldenCheck` (on the driver, before the run).

    ``every`` (``--golden DIR``): every case unless it says ``golden: false``; otherwise the
    cases that set ``golden``. A case that sets ``golden`` when the run has no folder is a
    :class:`UsageError`. ``input`` names the suite in the command that writes missing files.
    """
    cases = list(cases)
    folders = golden_folders(loaded.source for loaded in cases)
    for loaded, case_id, rule in _compared(cases, every):
        if folder is None:
            raise _no_folder(loaded.source, case_id)
        loaded.golden = _load(rule, golden_path(folder, case_id, loaded.source, folders.get(suite_of(loaded.source))), folder, input)


def check_folder(cases: Iterable[LoadedCase], folder: Path | None) -> None:
    """A case that sets ``golden`` when the run has no golden folder is a :class:`UsageError`
    (``farm validate`` checks it as ``farm test`` does, without reading any golden file)."""
    if folder is None:
        for loaded, case_id, _ in _compared(cases, every=False):
            raise _no_folder(loaded.source, case_id)


def _no_folder(source: str, case_id: str) -> UsageError:
    return UsageError(
        f"{source}: field 'golden': case '{case_id}' compares with a golden conversation, "
        "but the run has no golden folder: give --golden DIR or set [farm].golden_dir in farm.toml"
    )


def _compared(cases: Iterable[LoadedCase], every: bool) -> Iterable[tuple[LoadedCase, str, GoldenRule]]:
    """Each case that compares with its golden conversation, with its id and rule."""
    for loaded in cases:
        if not loaded.ok or loaded.script is not None:
            continue
        if not every and loaded.case is None and b'"golden"' not in (loaded.data or b""):
            continue  # cheap: a compact case without the field needs no validation
        case = loaded.materialized().case
        assert case is not None
        rule = case.golden
        if rule is None and every:
            rule = GoldenRule()
        if rule is None or not rule.enabled:
            continue
        yield loaded, case.id, rule


def _load(rule: GoldenRule, path: Path, folder: Path, input: str) -> GoldenCheck:
    check = GoldenCheck(rule=rule, path=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        command = f"farm test -i {shlex.quote(input)} --update-golden {shlex.quote(str(folder))}"
        check.missing = True
        check.problem = f"the golden file {path} does not exist; write it with: {command}"
        return check
    except OSError as exc:
        check.problem = f"the golden file {path} cannot be read: {exc}"
        return check
    try:
        conversation = GoldenConversation.model_validate_json(text)
    except ValidationError as exc:
        check.problem = f"the golden file {path} is not a golden conversation: {exc.errors()[0]['msg']}"
        return check
    if conversation.format > GOLDEN_FORMAT:
        check.problem = f"the golden file {path} has format {conversation.format}, newer than this farm reads ({GOLDEN_FORMAT}): upgrade the farm"
        return check
    check.conversation = conversation
    return check


async def compare(check: GoldenCheck, result: CaseResult, env: AssertionEnv | None) -> list[tuple[str, AssertionResult]]:
    """Compare ``result``'s conversation with the golden one; add the ``golden`` results to its
    turns and final assertions, and return them with where each belongs (``turn 2``,
    ``final assertions``; ``golden`` when there is no golden conversation to compare with)."""
    found: list[tuple[str, AssertionResult]] = []
    golden = check.conversation
    if golden is None:
        outcome = AssertionResult(type="golden", passed=False, message=check.problem, error=not check.missing)
        result.final_assertions.append(outcome)
        return [("golden", outcome)]
    for before, now in zip(golden.turns, result.turns, strict=False):
        outcome = await _compare_turn(check, before, now, env, result.id)
        now.assertions.append(outcome)
        found.append((f"turn {now.turn}", outcome))
    if len(golden.turns) != len(result.turns):
        outcome = AssertionResult(
            type="golden",
            expected=f"{len(golden.turns)} turns",
            actual=len(result.turns),
            passed=False,
            message=f"the conversation has {len(result.turns)} turns, the golden one {len(golden.turns)}",
            diff=_diff([_turn_line(t.turn, t.reply) for t in golden.turns], [_turn_line(t.turn, t.output) for t in result.turns], check.path, "turns"),
        )
        result.final_assertions.append(outcome)
        found.append(("final assertions", outcome))
    return found


async def _compare_turn(check: GoldenCheck, before: GoldenTurn, now: TurnResult, env: AssertionEnv | None, case_id: str) -> AssertionResult:
    rule = check.rule
    problems: list[str] = []
    diffs: list[str] = []
    score: float | None = None
    reason: str | None = None
    error = False
    old_json, new_json = whole_json(before.reply), whole_json(now.output)
    if old_json is not NO_JSON and new_json is not NO_JSON:
        if old_json != new_json:
            problems.append("the JSON reply differs from the golden one")
            diffs.append(_diff(pretty_json(old_json, sort_keys=True).splitlines(), pretty_json(new_json, sort_keys=True).splitlines(), check.path, f"turn {before.turn} reply"))
    elif before.reply == now.output:
        pass  # the same text passes every rule: no validator call for it
    elif rule.text == "exact":
        if before.reply != now.output:
            problems.append("the reply text differs from the golden one (exact)")
    elif rule.text == "similar":
        ratio = difflib.SequenceMatcher(None, before.reply, now.output).ratio()
        score = round(ratio, 3)
        if ratio < rule.threshold:
            # three places: 0.899 must not read as the 0.90 it misses
            problems.append(f"the reply text is {ratio:.3f} similar to the golden one (at least {rule.threshold:.3f} needed)")
    else:
        outcome = await _judge(rule, before, now, env, case_id)
        score, reason, error = outcome.score, outcome.reason, outcome.error
        if not outcome.passed:
            problems.append(outcome.message or "the validator judged that the reply does not say what the golden one says")
    if problems and not diffs:  # the text check failed: show how
        diffs.append(_diff(_text_lines(before.reply), _text_lines(now.output), check.path, f"turn {before.turn} reply"))
    old_calls = [_call_line(c.name, c.arguments) for c in before.tool_calls]
    new_calls = [_call_line(c.name, c.args) for c in now.tool_calls]
    if old_calls != new_calls:
        problems.append(_calls_problem(before, now))
        diffs.append(_diff(old_calls, new_calls, check.path, f"turn {before.turn} tool calls"))
    if before.awaiting_input != now.awaiting_input:
        problems.append(f"awaiting_input is {_flag(now.awaiting_input)}, the golden one {_flag(before.awaiting_input)}")
    return AssertionResult(
        type="golden",
        expected=f"turn {before.turn}, {_label(rule)}",
        passed=not problems,
        message="; ".join(problems) or None,
        score=score,
        reason=reason,
        error=error,
        diff="\n".join(d for d in diffs if d) or None,
    )


async def _judge(rule: GoldenRule, before: GoldenTurn, now: TurnResult, env: AssertionEnv | None, case_id: str) -> Outcome:
    if env is None:
        return Outcome(False, message="golden 'judge' needs a validator (none is available in this run)", error=True)
    criteria = (
        "The reply says the same as this golden reply (the same facts, decisions and questions; "
        f"the wording may differ). Golden reply: {before.reply}"
    )
    spec = AssertionSpec(type="agent", use=rule.use, value=criteria)
    subject = Subject(content=now.output, input=now.input, metadata={"test_id": case_id})
    return await env.validate(spec, subject)


def _text_lines(text: str) -> list[str]:
    """Reply text as the diff compares it: one line per sentence, so that one changed word in a
    long paragraph is one changed sentence, not the whole paragraph."""
    return [part for line in text.splitlines() for part in re.split(r"(?<=[.!?])\s+", line)]


def _call_line(name: str, arguments: Any) -> str:
    return f"{name}({json.dumps(json_value(arguments), sort_keys=True, ensure_ascii=False)})"


def _calls_problem(before: GoldenTurn, now: TurnResult) -> str:
    old = [c.name for c in before.tool_calls]
    new = [c.name for c in now.tool_calls]
    if old != new:
        return f"the tool calls are [{', '.join(new)}], the golden ones [{', '.join(old)}]"
    changed = [f"{i + 1} ({name})" for i, (name, a, b) in enumerate(zip(old, before.tool_calls, now.tool_calls, strict=True)) if json_value(a.arguments) != json_value(b.args)]
    return f"the arguments of tool call {', '.join(changed)} differ from the golden ones"


def _turn_line(turn: int, reply: str) -> str:
    text = reply.replace("\n", " ")
    return f"turn {turn}: {clip(text, 200, within=False)}"


def _diff(old: list[str], new: list[str], path: str, what: str) -> str:
    """A unified diff from the golden file's ``what`` to this run's."""
    return "\n".join(difflib.unified_diff(old, new, f"{path}: {what}", f"this run: {what}", lineterm=""))


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _label(rule: GoldenRule) -> str:
    return f"similar ≥ {rule.threshold:g}" if rule.text == "similar" else rule.text
