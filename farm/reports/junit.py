"""JUnit XML for CI systems (GitHub, GitLab, Jenkins): ``farm test --junit PATH``.

The document is the common dialect those systems read::

    <testsuites name="agent-test-farm" tests= failures= errors= skipped= time= timestamp=>
      <testsuite name="agent-test-farm" tests= failures= errors= skipped= time= timestamp=>
        <properties><property name="run_id" value="..."/></properties>
        <testcase classname="<agent>.<suite>" name="<id> — <name>[ run k]" time="1.234">
          <failure message="..." type="assertion">one line per failed assertion</failure>
          <system-out>the transcript: turns, tool calls, assertions</system-out>
        </testcase>
      </testsuite>
    </testsuites>

The ``classname`` is the agent, a dot, and the case's suite without its suffix
(``support-bot.suites/smoke``; ``<stdin>``, ``<message>``, ``agents:<id>``): a case id may
repeat across a run's suites, and CI systems group the testcases by it as by package and class.
One ``testcase`` per case run: ``failed`` carries a ``failure`` with the
failed assertions' messages, ``error`` and ``timeout`` an ``error`` (type
``error``/``timeout``), ``skipped`` a ``skipped`` with the reason. With
``--runs N`` a case is one ``testcase`` for all its tries, so a CI dashboard
shows one test, not N: its ``pass_rate`` and ``tries`` are properties, it fails
(type ``gate``) when below ``--min-pass-rate``, errs when a try errored or timed
out, and its failed tries' messages are in ``system-out``. A run that stopped before every case
ran (``--max-cost``, ``--fail-fast``, an interrupt) ends with one more ``testcase``, ``run stopped
early``, whose ``error`` says why and how many case runs did not run: never a green suite for part
of a run. Suite ``time`` is the run's wall span (first case start to last case
end) when cases carry start times, else the sum of case durations.

Memory stays flat: each testcase is serialised to a temporary file beside
``path`` as its result arrives; ``close`` writes the header (the counts are
known then), copies the testcases after it and renames the finished document
into place.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from farm.excerpts import clip
from farm.jsontext import as_text
from farm.reports.streamed import StreamedReport
from farm.results import AssertionResult, CaseResult, Status, TurnResult, format_usd
from farm.suite.loader import FILE_SUFFIXES

if TYPE_CHECKING:
    from farm.writers.runinfo import RunGate

_SLACK = 1e-9
"""As :mod:`farm.gate`'s: ``0.7 * 10`` is ``7.000000000000001``."""

__all__ = ["JUnitWriter", "for_run", "failure_lines", "testcase", "transcript", "xml_text"]

SUITE_NAME = "agent-test-farm"
#: Longest ``message`` attribute; the element's text holds the full list.
MESSAGE_LIMIT = 1000

# Characters XML 1.0 does not allow at all (even escaped), surrogates included.
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: Any) -> str:
    """``value`` as text XML 1.0 can hold: characters it forbids are removed."""
    return _ILLEGAL_XML.sub("", value if isinstance(value, str) else str(value))


class JUnitWriter(StreamedReport):
    """A :class:`~farm.writers.ResultWriter` that writes JUnit XML to ``path`` on ``close``."""

    label = "JUnit"

    def __init__(
        self, path: str | os.PathLike[str], run_id: str, runs: int = 1, min_pass_rate: float = 1.0, gate: Callable[[], RunGate | None] | None = None
    ):
        super().__init__(path, run_id)
        self.runs = runs
        self.min_pass_rate = min_pass_rate
        self.gate = gate
        """The run's gate once decided (before the outputs close): a run stopped early adds its testcase."""
        self._stopped = 0
        self._tries: dict[tuple[str, str, str], _Tries] = {}
        """Repeated cases whose tries are not all in yet: what their testcase needs, not the results."""
        self._counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)

    def render(self, result: CaseResult) -> str:
        if self.runs <= 1:
            return ET.tostring(testcase(result), encoding="unicode") + "\n"
        key = (result.agent or "", result.suite, result.id)
        tries = self._tries.setdefault(key, _Tries(result))
        tries.add(result)
        if tries.seen < self.runs:
            return ""
        del self._tries[key]
        return self._grouped(tries)

    def _grouped(self, tries: _Tries) -> str:
        element, outcome = tries.testcase(self.min_pass_rate)
        self._counts["tests"] += 1
        if outcome != "passed":
            self._counts[outcome] += 1
        return ET.tostring(element, encoding="unicode") + "\n"

    def close(self) -> None:
        """The repeated cases whose tries did not all run (``--fail-fast``, an interrupt) as they are, then the document."""
        if not self.closed:
            for tries in list(self._tries.values()):
                self._parts.write(self._grouped(tries))
            self._tries.clear()
            gate = self.gate() if self.gate is not None else None
            if gate is not None and gate.stopped:
                self._parts.write(ET.tostring(_stopped_testcase(gate), encoding="unicode") + "\n")
                self._stopped = 1
        super().close()

    def head(self) -> str:
        attrs = self._suite_attributes()
        properties = ET.Element("properties")
        ET.SubElement(properties, "property", name="run_id", value=xml_text(self.run_id))
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            + _open_tag("testsuites", {"name": SUITE_NAME, **attrs}) + "\n"
            + _open_tag("testsuite", {"name": SUITE_NAME, **attrs}) + "\n"
            + ET.tostring(properties, encoding="unicode") + "\n"
        )

    def foot(self) -> str:
        return "</testsuite>\n</testsuites>\n"

    def _suite_attributes(self) -> dict[str, str]:
        summary = self.summary
        seconds = summary.span_seconds
        if seconds is None:
            seconds = summary.duration_ms / 1000
        started = summary.first_start if summary.first_start is not None else self._created
        counts = self._counts if self.runs > 1 else {
            "tests": summary.total, "failures": summary.failed, "errors": summary.errors + summary.timeouts, "skipped": summary.skipped
        }  # fmt: skip
        counts = {**counts, "tests": counts["tests"] + self._stopped, "errors": counts["errors"] + self._stopped}
        return {
            **{name: str(count) for name, count in counts.items()},
            "time": f"{seconds:.3f}",
            "timestamp": datetime.fromtimestamp(started).astimezone().isoformat(timespec="seconds"),
        }


def _stopped_testcase(gate: RunGate) -> ET.Element:
    """The testcase of a run that stopped before every case ran: an error saying why."""
    from farm.gate import STOPPED

    element = ET.Element("testcase", classname=SUITE_NAME, name="run stopped early", time="0.000")
    said = f"{STOPPED.get(gate.stopped or '', 'the run stopped early')}: {gate.not_run} case run{'' if gate.not_run == 1 else 's'} not run"
    ET.SubElement(element, "error", type=gate.stopped or "stopped", message=xml_text(said)).text = xml_text(said)
    return element


def _open_tag(tag: str, attrs: dict[str, str]) -> str:
    return f"<{tag} " + " ".join(f"{key}={quoteattr(xml_text(value))}" for key, value in attrs.items()) + ">"


# --- one testcase ------------------------------------------------------------


class _Tries:
    """The tries of one repeated case, as far as its testcase needs them: counts, time, and the
    failed tries' messages (not their transcripts), so memory grows with cases, not with tries."""

    def __init__(self, first: CaseResult):
        self.id, self.name, self.classname = first.id, first.name, classname(first)
        self.seen = self.passes = self.tries = 0
        self.seconds = 0.0
        self.broken: str | None = None
        """``error`` or ``timeout`` when a try ended so."""
        self.failed: list[str] = []
        self.stopped: tuple[str, int, str | None] | None = None
        """Under adaptive repeats: why the case stopped, its tries and its verdict (its last try says)."""

    def add(self, result: CaseResult) -> None:
        status = Status(result.status)
        self.seen += 1
        if result.stopped is not None:
            self.stopped = (result.stopped, result.tries or 0, result.verdict)
        self.seconds += result.duration_ms / 1000
        if status is Status.SKIPPED:
            return
        self.tries += 1
        self.passes += status is Status.PASSED
        if status in (Status.ERROR, Status.TIMEOUT):
            self.broken = self.broken or status.value
        if status is not Status.PASSED:
            lines = failure_lines(result) or []
            if status is not Status.FAILED or not lines:
                lines = [result.error or f"the case ended with {status.value}", *lines]
            self.failed.append(f"run {result.run_index + 1}: {status.value}\n" + "\n".join(f"  {line}" for line in lines))

    def testcase(self, min_pass_rate: float) -> tuple[ET.Element, str]:
        """The ``<testcase>`` and what it counts as: ``passed``, ``failures``, ``errors`` or ``skipped``."""
        name = self.id + (f" — {self.name}" if self.name else "")
        element = ET.Element("testcase", classname=self.classname, name=xml_text(name), time=f"{self.seconds:.3f}")
        rate = self.passes / self.tries if self.tries else None
        properties = ET.SubElement(element, "properties")
        for key, value in (("pass_rate", "" if rate is None else f"{rate:g}"), ("tries", self.tries), ("passed", self.passes), ("min_pass_rate", f"{min_pass_rate:g}")):
            ET.SubElement(properties, "property", name=key, value=str(value))
        said = f"passed {self.passes} of {self.tries} tries"
        below = self.passes < min_pass_rate * self.tries - _SLACK
        if self.stopped is not None:  # adaptive repeats: the sequential rule's verdict is the gate's
            from farm.sequential import stop_said

            ET.SubElement(properties, "property", name="stopped", value=self.stopped[0])
            said, below = f"{stop_said(*self.stopped)}; {said}", self.stopped[2] != "above"
        if self.tries == 0:
            ET.SubElement(element, "skipped", message="every try was skipped")
            outcome = "skipped"
        elif self.broken:
            _fill(ET.SubElement(element, "error", type=self.broken), [f"{said}; a try ended in {self.broken}", *self.failed])
            outcome = "errors"
        elif below:
            _fill(ET.SubElement(element, "failure", type="gate"), [f"{said}, below the {min_pass_rate:g} gate", *self.failed])
            outcome = "failures"
        else:
            outcome = "passed"
        ET.SubElement(element, "system-out").text = xml_text("\n".join([f"{said} (the gate: {min_pass_rate:g})", *self.failed]) + "\n")
        return element, outcome


def classname(result: CaseResult) -> str:
    """``<agent>.<suite>``: the agent (or the farm's name), and the case's suite without its suffix."""
    suite = result.suite
    for suffix in FILE_SUFFIXES:
        if suite.endswith(suffix) and len(suite) > len(suffix):
            suite = suite[: -len(suffix)]
            break
    return xml_text(f"{result.agent or SUITE_NAME}.{suite}" if suite else result.agent or SUITE_NAME)


def testcase(result: CaseResult) -> ET.Element:
    """The ``<testcase>`` element of one case run."""
    name = result.id + (f" — {result.name}" if result.name else "")
    if result.run_index:
        name += f" run {result.run_index + 1}"
    element = ET.Element(
        "testcase",
        classname=classname(result),
        name=xml_text(name),
        time=f"{result.duration_ms / 1000:.3f}",
    )
    status = Status(result.status)
    problems = failure_lines(result)
    if status is Status.FAILED:
        child = ET.SubElement(element, "failure", type="assertion")
        _fill(child, problems or [result.error or "the case failed"])
    elif status in (Status.ERROR, Status.TIMEOUT):
        child = ET.SubElement(element, "error", type=status.value)
        _fill(child, [result.error or f"the case ended with {status.value}", *problems])
    elif status is Status.SKIPPED:
        reason = result.error or (
            f"the agent asked: {result.awaiting_question}" if result.awaiting_question else "skipped"
        )
        ET.SubElement(element, "skipped", message=clip(xml_text(reason), MESSAGE_LIMIT))
    ET.SubElement(element, "system-out").text = xml_text(transcript(result))
    return element


def _fill(child: ET.Element, lines: list[str]) -> None:
    child.set("message", clip(xml_text("; ".join(line.split("\n", 1)[0] for line in lines)), MESSAGE_LIMIT))
    child.text = xml_text("\n".join(lines))


def failure_lines(result: CaseResult) -> list[str]:
    """One line per failed assertion and unreached required checkpoint, where it happened first."""
    lines = []
    for turn in result.turns:
        lines += [f"turn {turn.turn}: {_assertion_text(a)}{_diff(a)}" for a in turn.assertions if not a.passed]
    lines += [f"final: {_assertion_text(a)}{_diff(a)}" for a in result.final_assertions if not a.passed]
    for checkpoint in result.checkpoints:
        if checkpoint.required and not checkpoint.reached:
            why = checkpoint.assertion.message if checkpoint.assertion and checkpoint.assertion.message else None
            lines.append(f"checkpoint {checkpoint.id} not reached" + (f": {why}" if why else ""))
    return lines


def _assertion_text(assertion: AssertionResult) -> str:
    kind = ("not " if assertion.negate else "") + assertion.type
    text = f"{kind} {_json(assertion.expected)}" if assertion.expected is not None else kind
    if assertion.message:
        text += f" — {assertion.message}"
    if assertion.score is not None:
        text += f" (score {assertion.score:g})"
    return text


def _diff(assertion: AssertionResult) -> str:
    """A golden assertion's diff on the lines below its own (the ``message`` attribute keeps one line)."""
    return "\n" + assertion.diff if assertion.diff else ""


def transcript(result: CaseResult) -> str:
    """The case run as plain text: header, each turn's input, reply, tool calls and assertions."""
    lines = [
        f"case {result.id}" + (f" — {result.name}" if result.name else ""),
        f"status: {Status(result.status).value}; run {result.run_index + 1}, attempt {result.attempt}; "
        f"{result.total_turns or len(result.turns)} turns; {result.duration_ms:.0f} ms; "
        f"{result.usage.total_tokens} tokens"
        + ("" if result.cost_usd is None else f"; {format_usd(result.cost_usd)}")
        + ("" if result.role_cost_usd is None else f" (simulator and judge {format_usd(result.role_cost_usd)})"),
    ]
    for label, value in (
        ("agent", result.agent),
        ("mode", result.mode),
        ("source", result.source),
        ("worker", result.worker),
    ):
        if value:
            lines.append(f"{label}: {value}")
    for turn in result.turns:
        lines += _turn_lines(turn)
    if result.final_assertions:
        lines.append("")
        lines.append("final assertions:")
        lines += [f"  {_mark(a.passed)} {_assertion_text(a)}" for a in result.final_assertions]
    if result.checkpoints:
        lines.append("")
        lines.append("checkpoints:")
        for checkpoint in result.checkpoints:
            state = f"reached at turn {checkpoint.reached_at_turn}" if checkpoint.reached else "not reached"
            optional = "" if checkpoint.required else " (optional)"
            description = f" — {checkpoint.description}" if checkpoint.description else ""
            lines.append(f"  {_mark(checkpoint.reached)} {checkpoint.id} {state}{optional}{description}")
    if result.awaiting_question:
        lines.append("")
        lines.append(f"agent asked: {result.awaiting_question}")
    if result.error:
        lines.append("")
        lines.append(f"error: {result.error}")
    if result.hint:
        lines.append(f"hint: {result.hint}")
    return "\n".join(lines) + "\n"


def _turn_lines(turn: TurnResult) -> list[str]:
    head = f"turn {turn.turn} [{turn.input_source}] {turn.duration_ms:.0f} ms"
    if turn.usage.total_tokens:
        head += f", {turn.usage.total_tokens} tokens"
    if turn.cost_usd is not None:
        head += f", {format_usd(turn.cost_usd)}"
    if turn.retries:
        head += f", {turn.retries} retried request(s)"
    if turn.truncated:
        head += ", reply cut at the token limit"
    lines = ["", head, f"  user: {_input(turn.input)}"]
    for call in turn.tool_calls:
        mocked = " (mocked)" if call.mocked else ""
        lines.append(f"  tool: {call.name}({_json(call.args)}) -> {_json(call.result)}{mocked}")
    lines.append(f"  agent: {turn.output}")
    if turn.awaiting_input:
        lines.append(f"  awaiting input ({turn.awaiting_reason})" + (f": {turn.input_hint}" if turn.input_hint else ""))
    if turn.simulator_reasoning:
        lines.append(f"  simulator reasoning: {turn.simulator_reasoning}")
    lines += [f"  {_mark(a.passed)} {_assertion_text(a)}" for a in turn.assertions]
    if turn.note:
        lines.append(f"  note: {turn.note}")
    if turn.error:
        lines.append(f"  error: {turn.error}")
    return lines


def _mark(passed: bool) -> str:
    return "✓" if passed else "✗"


def _input(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    try:
        return as_text(value)
    except ValueError:  # a circular structure
        return repr(value)


def for_run(path: str | os.PathLike[str], run_id: str, info: dict[str, Any], gate: Callable[[], RunGate | None] | None) -> JUnitWriter:
    """``--junit``'s writer (:data:`farm.writers.extra.EXTRA_WRITERS`): a repeated case's tries as
    one test case, judged by the run's ``min_pass_rate``."""
    return JUnitWriter(path, run_id, runs=int(info.get("runs") or 1), min_pass_rate=float(info.get("min_pass_rate") or 1.0), gate=gate)
