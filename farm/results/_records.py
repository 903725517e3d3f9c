"""Result records: what a run produces, one :class:`CaseResult` per case run.

These are the JSONL lines (docs/reference/outputs.md, the seed's "JSONL Output" shape)
and the source of the Parquet tables, whose rows :mod:`farm.writers.rows`
defines. ``SCHEMA_VERSION`` changes whenever a field changes meaning or type.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from farm.results._folder import CASE_RUN_KEY, CaseRunKey, suite_of

__all__ = [
    "CASE_KEY",
    "CASE_RUN_KEY",
    "SCHEMA_VERSION",
    "BLAME",
    "SIM_FLAGS",
    "AssertionResult",
    "Blame",
    "CaseResult",
    "SpanRecord",
    "StepReply",
    "CheckpointResult",
    "EndedBy",
    "ErrorRole",
    "InputSource",
    "RetriedAttempt",
    "RoleCall",
    "StabilityClass",
    "Status",
    "ACTUAL_LIMIT",
    "OUTPUT_LIMIT",
    "ToolCallRecord",
    "TurnResult",
    "Usage",
    "add_cost",
    "blame_text",
    "clip_output",
    "NO_REPLY",
    "format_usd",
    "stability_class",
]

NO_REPLY = "no_reply"
"""A turn's ``awaiting_reason`` when it ended before the agent replied (an error, a timeout)."""

CASE_KEY = ("suite", "case_id")
"""What names one case across runs, and so what every comparison of two runs pairs cases by (with
the agent, when each run tested several): its suite, as the reader works it out from the case's
``source`` (:mod:`farm.results._suites`), and its id. Ids repeat across suites: an id alone would
pair two different cases."""

#: 3: the Parquet columns are defined once, by the row models of ``farm.writers.rows``.
#: 4: ``error_role`` names the role whose failure made a case an ``error`` (a simulator error was ``skipped``).
#: 5: turns have ``truncated`` (a reply cut at the model's token limit).
#: 6: turns have ``sim_flags``; a failed dynamic case has ``blame`` and ``blame_reason``.
#: 7: every table has ``suite``: a case id may repeat across the suites of one run. A case run has
#:    ``trace_id`` and ``role_log``, a turn ``span_id`` and ``started_at`` (traced or exported runs).
SCHEMA_VERSION = 7

#: Longest ``actual`` value kept in an assertion result.
ACTUAL_LIMIT = 500

#: Longest turn ``output`` a written row keeps, in characters (64 Ki): one reply cannot swell the results.
OUTPUT_LIMIT = 65_536


def clip_output(text: str) -> tuple[str, int | None]:
    """``text`` as a row keeps it: cut to :data:`OUTPUT_LIMIT` characters, with its whole
    length when it was cut (None when it was kept whole)."""
    if len(text) <= OUTPUT_LIMIT:
        return text, None
    return text[:OUTPUT_LIMIT], len(text)


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"
    TIMEOUT = "timeout"

    @property
    def ok(self) -> bool:
        """Whether this status lets the run exit 0."""
        return self in (Status.PASSED, Status.SKIPPED)


EndedBy = Literal["agent", "simulator", "tool_mock", "case_timeout", "unreachable"]
"""Which side ended a conversation early (:attr:`CaseResult.ended_by`)."""

ErrorRole = Literal["simulator", "validator", "generator", "reporter"]
"""The role whose failure made a case an ``error`` (:attr:`CaseResult.error_role`): never the agent's fault."""

Blame = Literal["agent", "simulator", "checkpoint", "unknown"]
"""Whose failure a failed dynamic case is (:attr:`CaseResult.blame`)."""

BLAME: tuple[str, ...] = ("agent", "simulator", "checkpoint", "unknown")
"""The blames, in the order summaries list them."""

SIM_FLAGS: dict[str, str] = {
    "empty": "sent an input with no words",
    "repeat": "repeated an earlier user turn word for word",
    "as_assistant": "spoke as the assistant",
    "recites_checkpoint": "copied a checkpoint's expected text",
    "early_end": "said the goal was achieved while a required checkpoint was unmet",
}
"""The flags a simulated turn may carry (:attr:`TurnResult.sim_flags`), each with what the
simulator did, as the console, the report and a blame's reason say it."""


def blame_text(blames: dict[str, int]) -> str | None:
    """Failed cases by whose failure they are, as every summary says it: ``7 failed: 5 agent, 2
    simulator``; None when no case was blamed."""
    total = sum(blames.values())
    if not total:
        return None
    order = [*BLAME, *sorted(set(blames) - set(BLAME))]
    return f"{total} failed: " + ", ".join(f"{blames[name]} {name}" for name in order if blames.get(name))


InputSource = Literal["static", "simulated", "human"]
"""Where a turn's input came from: the case, the simulator or a person at the terminal."""


class Usage(BaseModel):
    """Token usage as the agent reported it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those the API served from its prompt cache (OpenAI's
    ``prompt_tokens_details.cached_tokens``); 0 when it does not say."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


def format_usd(value: float | None) -> str:
    """A cost as the console and the reports show it: ``$0.0123``, ``$1,234.50``; ``—`` when unknown (no price).

    Below a cent, with two significant digits (``$0.000085``, not ``$0.0001``): one case of a cheap
    model costs that little, and four decimals would round it away.
    """
    if value is None:
        return "—"
    if value >= 100:
        return f"${value:,.2f}"
    decimals = max(4, 1 - math.floor(math.log10(value))) if value > 0 else 4
    return f"${value:.{decimals}f}"


def add_cost(total: float | None, cost: float | None) -> float | None:
    """``total + cost`` where an unknown cost (None: no ``price``) adds nothing; None only when both are."""
    if cost is None:
        return total
    return cost if total is None else total + cost


class ToolCallRecord(BaseModel):
    """One tool call the agent made, with the result the farm gave back."""

    id: str | None = None
    """The call id the agent gave, if any."""
    name: str
    """The tool's name."""
    args: Any = None
    """The parsed arguments (the raw string when they are not JSON)."""
    result: Any = None
    """The mock result sent back, or ``{"status": "ok"}`` when none was given."""
    mocked: bool = False
    """Whether ``result`` came from a ``tool_mocks`` entry."""
    step: int = 1
    """The agent call of the turn (1-based, see ``TurnResult.steps``) whose reply made this call."""


class AssertionResult(BaseModel):
    """The outcome of one assertion or checkpoint check."""

    model_config = ConfigDict(extra="allow")

    type: str
    """The assertion type, e.g. ``contains``."""
    expected: Any = None
    """What the assertion expected."""
    actual: Any = None
    """What was found, truncated to a few hundred characters."""
    passed: bool
    """Whether it passed (after ``negate``)."""
    message: str | None = None
    """Why it failed (or the user's ``message``); empty when it passed."""
    negate: bool = False
    """Whether the assertion was negated."""
    score: float | None = None
    """A validator's or script's score, when it gave one."""
    reason: str | None = None
    """A validator's or script's reason."""
    suggestions: list[str] | None = None
    """A validator's suggestions."""
    error: bool = False
    """True when the assertion could not be evaluated at all (not a plain failure)."""
    matched_by: str | None = None
    """For ``tool_called``: which rule matched the tool name (``exact``, ``suffix``, ``substring``)."""
    diff: str | None = None
    """For ``golden``: how the conversation differs from the golden one (unified diffs of the
    reply text and of the tool calls); null when it passed."""


class StepReply(BaseModel):
    """What one agent call of a turn answered, beyond the turn's ``output`` and ``tool_calls``:
    what ``farm rescore`` needs to replay the turn without the agent."""

    content: str | None = None
    """The reply's content; null when it is the turn's ``output`` (the common case: one step,
    or the step whose content became the ``output``). Cut like ``output`` when written."""
    content_chars: int | None = None
    """The content's whole length in characters when the written ``content`` was cut; null otherwise."""
    awaiting_input: bool | None = None
    """``awaiting_input`` as the agent declared it in this reply; null when it declared nothing."""
    input_hint: str | None = None
    """The input hint the agent gave in this reply."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens the agent reported for this call."""
    retries: int = 0
    """Requests repeated to get this reply."""

    # Cut when written, one field at a time: a serializer of the whole model (mode="wrap") would
    # make every record's JSON go through Python dicts, twice the cost of a JSONL line.
    @field_serializer("content")
    def _clip_content(self, content: str | None) -> str | None:
        return None if content is None else clip_output(content)[0]

    @field_serializer("content_chars")
    def _content_chars(self, chars: int | None) -> int | None:
        return len(self.content) if self.content is not None and len(self.content) > OUTPUT_LIMIT else chars


class RoleCall(BaseModel):
    """One call of a role agent made for a case run (its simulator, a judge, the attributor): what
    ``--otlp`` sends as a ``chat`` span of the case run's trace."""

    role: str
    """``simulator``, ``validator`` or ``attributor``."""
    agent: str
    """The role's agent id."""
    turn: int | None = None
    """The turn it was made for, where it was made for one."""
    started_at: float
    """Unix time, seconds."""
    duration_ms: float
    error: str | None = None
    """Why the call failed; None when it answered."""
    traceback: str | None = None
    """Where a python role agent raised (its own frames, masked of secrets, bounded); ``-v`` shows it."""


class SpanRecord(BaseModel):
    """One OpenTelemetry span an agent made in a turn, as trace assertions read it (docs/traces.md)."""

    trace_id: str
    """32 hex digits: the case run's trace."""
    span_id: str
    """16 hex digits."""
    parent_span_id: str | None = None
    """The span's parent: another of the agent's spans, or the farm's ``invoke_agent`` span of the turn."""
    name: str
    """The span's name (``execute_tool search``, ``chat gpt-4o``)."""
    operation: str | None = None
    """``gen_ai.operation.name`` (``execute_tool``, ``chat``, ``invoke_agent``...), if the span has one."""
    tool_name: str | None = None
    """For an ``execute_tool`` span: ``gen_ai.tool.name``, else its name after ``execute_tool ``."""
    start: float
    """Unix time the span started, in seconds."""
    duration_ms: float
    """How long the span took."""
    status: Literal["unset", "ok", "error"] = "unset"
    status_message: str | None = None
    """The description of an error status."""
    attributes: dict[str, Any] = Field(default_factory=dict)
    """The span's attributes, secrets masked and long values cut."""


class TurnResult(BaseModel):
    """One exchange: the user input and the agent's reply."""

    turn: int
    """1-based turn number."""
    input: Any = None
    """What the user sent."""
    input_source: InputSource = "static"
    """``static``, ``simulated`` or ``human``."""
    output: str = ""
    """The agent's reply content; a written row keeps its first ``OUTPUT_LIMIT`` (65536) characters."""
    output_chars: int | None = None
    """The reply's whole length in characters when the row's ``output`` was cut; null when kept whole."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """Tool calls made during the turn, in order."""
    awaiting_input: bool = False
    """Whether the agent awaits user input after this reply."""
    awaiting_reason: str = "completed"
    """``agent_declared``, ``tool_requires_confirmation``, ``content_is_question``,
    ``tool_calls`` or ``completed``; ``no_reply`` when the turn ended before the agent replied
    (an error, the turn's or the case's timeout)."""
    input_hint: str | None = None
    """The hint the agent gave for the input it awaits."""
    assertions: list[AssertionResult] = Field(default_factory=list)
    """This turn's assertion results."""
    duration_ms: float = 0.0
    """The agent's time in the turn, all its steps included: from sending each request to its
    reply, without the time spent waiting for a rate-limit permit (that is ``queued_ms``)."""
    queued_ms: float = 0.0
    """Time the turn waited for rate-limit permits of the agent's connector (not agent time)."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens the agent reported for this turn."""
    cost_usd: float | None = None
    """What the turn's agent calls cost in USD at the price of the connector that served them; null
    when it has no ``price`` (or no request was sent: a reply from the cache costs 0)."""
    steps: int = 1
    """Agent calls in this turn (more than one when tool mocks were answered)."""
    retries: int = 0
    """Requests to the agent repeated in this turn (429, 5xx, connection errors), all steps together."""
    truncated: bool = False
    """Whether a reply of the turn was cut at the model's token limit (``finish_reason: length``):
    an assertion that passed on half an answer is worth a look."""
    note: str | None = None
    """What is worth knowing about a turn that is no error, e.g. "stopped after 8 tool steps"."""
    simulator_reasoning: str | None = None
    """The simulator's reasoning for a simulated input."""
    sim_flags: list[str] = Field(default_factory=list)
    """What the simulator did wrong in this turn, by the farm's deterministic checks
    (:data:`SIM_FLAGS`): ``empty``, ``repeat``, ``as_assistant``, ``recites_checkpoint`` judge the
    turn's simulated input; ``early_end`` that the simulator ended the conversation after this
    turn while a required checkpoint was unmet. Empty for a turn played well, or not simulated."""
    error: str | None = None
    """What went wrong in this turn, if anything."""
    traceback: str | None = None
    """Where an in-process (``python``) agent raised in the turn: its own frames, masked of
    secrets, at most 8000 characters (its end); ``farm test -v`` and the viewer show it."""
    replies: list[StepReply] = Field(default_factory=list)
    """One entry per agent call of the turn (``steps``), in order: what ``farm rescore`` replays."""
    started_at: float | None = None
    """When the turn's input was sent (Unix time, seconds); None in results written before it was kept."""
    span_id: str | None = None
    """The turn's span in the case run's trace (16 hex digits), named in the agent's ``traceparent``;
    None when the run neither captured nor exported traces."""
    spans: list[SpanRecord] = Field(default_factory=list)
    """The OpenTelemetry spans the agent made in the turn, in the order they ended (the farm's own
    ``invoke_agent`` span not among them); recorded when the case asserts on traces or
    ``[farm].traces`` is on (docs/traces.md)."""

    # Cut when written, not when set: the turn's assertions judge the whole reply.
    @field_serializer("output")
    def _clip_output(self, output: str) -> str:
        return clip_output(output)[0]

    @field_serializer("output_chars")
    def _output_chars(self, chars: int | None) -> int | None:
        return len(self.output) if len(self.output) > OUTPUT_LIMIT else chars


class CheckpointResult(BaseModel):
    """A dynamic-mode checkpoint and whether (and when) it was reached."""

    id: str
    description: str | None = None
    required: bool = True
    reached: bool = False
    reached_at_turn: int | None = None
    """The turn at which it was reached, or null."""
    assertion: AssertionResult | None = None
    """The assertion result that reached it (or the last failed attempt)."""


class RetriedAttempt(BaseModel):
    """An earlier attempt of a case that ended in an agent error or timeout and was run again (``--retries``)."""

    attempt: int
    """Its attempt number (1 for the first)."""
    status: Status
    """``error`` or ``timeout``."""
    error: str | None = None
    """Why it ended so."""


class CaseResult(BaseModel):
    """One run of one case: a JSONL line and a row of ``cases.parquet``."""

    schema_version: int = SCHEMA_VERSION
    """Version of this record's shape."""
    run_id: str = ""
    """The run this result belongs to."""
    run_index: int = 0
    """Which of ``--runs N`` repetitions (0-based)."""
    attempt: int = 1
    """1, or more when the case was run again: its worker died, or ``--retries`` retried an
    agent error or timeout (see ``retried``)."""
    id: str
    """The case id."""
    name: str | None = None
    """The case name."""
    status: Status
    """``passed``, ``failed``, ``skipped``, ``error`` or ``timeout``."""
    mode: str | None = None
    """``single``, ``static`` or ``dynamic`` (null when the case did not load)."""
    agent: str | None = None
    """The target agent's id."""
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    """``file:line`` the case came from."""
    turns: list[TurnResult] = Field(default_factory=list)
    checkpoints: list[CheckpointResult] = Field(default_factory=list)
    final_assertions: list[AssertionResult] = Field(default_factory=list)
    total_turns: int = 0
    duration_ms: float = 0.0
    error: str | None = None
    """Why the case failed, errored, timed out or was skipped, in one sentence."""
    awaiting_question: str | None = None
    """For a case skipped or failed because the agent awaited input: its question."""
    hint: str | None = None
    """What the user can do about it."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens reported by the target agent over the whole case."""
    cost_usd: float | None = None
    """What the agent under test cost over the case, in USD (the sum of its turns' ``cost_usd``);
    null when its connector has no ``price``. The roles' spend is ``role_cost_usd``."""
    role_cost_usd: float | None = None
    """What the role calls made for the case (simulator, validator) cost, in USD, at their
    connectors' prices; null when none of them has a ``price``. Never part of ``cost_usd``."""
    started_at: float | None = None
    """Unix time the case started."""
    worker: str | None = None
    """The actor (or process) the conversation ran on."""
    logs: list[str] = Field(default_factory=list)
    """Lines a script test wrote with ``t.log``."""
    retried: list[RetriedAttempt] = Field(default_factory=list)
    """The earlier attempts ``--retries`` ran again (their error or timeout), oldest first; empty
    when this is the case's first attempt at it."""
    role_calls: int = 0
    """Calls the role cache could answer that were made for this case: simulator and validator
    calls, and the agent's own when it sets ``cache = true``."""
    cache_hits: int = 0
    """Of ``role_calls``, those answered from the role cache (no request sent)."""
    ended_by: EndedBy | None = None
    """Which side ended the conversation early: ``agent`` (a turn's agent error or timeout),
    ``simulator`` (it failed or answered no input), ``tool_mock`` (a ``scripts:`` mock failed),
    ``case_timeout`` (the case's timeout ran out) or ``unreachable`` (the agent's connector never
    answered and its connections kept failing: the run stopped there). Null when the conversation ended normally
    or an assertion, a checkpoint or a missing input stopped it."""
    error_role: ErrorRole | None = None
    """For an ``error`` that a role caused, the role: ``simulator`` (it failed or answered nothing
    usable after one retry), ``validator`` (a judge of an ``agent`` assertion, a checkpoint or a
    golden comparison failed), ``generator`` or ``reporter``. Null when the agent, the case or
    nothing went wrong; figures about the agent leave these rows out."""
    stopped: Literal["decided_above", "decided_below", "max_tries"] | None = None
    """Under adaptive repeats (``--runs auto``, ``--runs MIN..MAX``), set on a case's last try: why
    the case stopped there: its pass rate decided above or below the gate (``--min-pass-rate``), or
    no decision within the most tries (``max_tries``: judged then by the fixed-N rule). Null on the
    other tries, under ``--runs N`` and for a skipped case (docs/adaptive.md)."""
    tries: int | None = None
    """With ``stopped``: the tries of the case the decision counted (those the agent made)."""
    verdict: Literal["above", "below"] | None = None
    """With ``stopped``: the case's gate verdict, above (it passes its gate) or below."""
    goal_achieved_at: int | None = None
    """The turn for which the simulator said the goal is achieved instead of giving an input
    that was sent (the conversation ended there); null otherwise."""
    blame: Blame | None = None
    """Whose failure a failed dynamic case is: ``agent``, ``simulator`` (it played the user badly:
    see its turns' ``sim_flags``), ``checkpoint`` (the case's own checkpoint cannot be met as
    written) or ``unknown``. Null for every other case. A simulator-blamed case is an ``error`` of
    the simulator instead when ``[farm].simulator_failures = "error"``."""
    blame_reason: str | None = None
    """Why ``blame`` is what it is, in one sentence."""
    inputs_digest: dict[str, str] | None = None
    """Digests of what shaped the conversation (the agent, the inputs, the simulator, the tool
    mocks, the options sent to the agent), by part; ``farm rescore`` compares them with the
    edited suite's to tell whether the recorded conversation still answers it."""
    rescorable: bool | None = None
    """Set by ``farm rescore``: false when the case could not be rescored (its inputs changed
    since the run, or the recording ends before a turn the edited case needs); null in a live run."""
    rescored_from: str | None = None
    """Set by ``farm rescore``: the run id whose recorded conversation this result re-evaluated."""
    role_log: list[RoleCall] = Field(default_factory=list)
    """Each role call made for the case run, in the order they started (:class:`RoleCall`)."""
    trace_id: str | None = None
    """The case run's trace (32 hex digits), when the run captured or exported traces: what its
    agent's spans and its ``--otlp`` export are found by in a tracing backend."""
    spans_dropped: int = 0
    """Spans the agent made beyond ``[farm].max_spans`` in the case run: counted, not kept."""

    @property
    def agent_failed(self) -> bool:
        """Whether it ended in an error or timeout from the agent's side, the case's timeout
        included (``--retries`` runs those again)."""
        return self.ended_by in ("agent", "case_timeout") and self.status in (Status.ERROR, Status.TIMEOUT)

    @property
    def suite(self) -> str:
        """The suite of the case within its run (:func:`~farm.results._folder.suite_of` of ``source``)."""
        return suite_of(self.source)

    def run_key(self, agent: str | None = None) -> CaseRunKey:
        """What names this case run within its run (``agent``: the agent of a result that names none)."""
        return CaseRunKey(self.suite, self.id, self.run_index, self.agent or agent or "")

    def to_json_line(self) -> str:
        return self.model_dump_json(exclude_none=False)


class StabilityClass(StrEnum):
    """How stable a case is over repeated runs, best first (the order every listing uses)."""

    STABLE = "stable"
    """Passed every run."""
    MOSTLY_STABLE = "mostly_stable"
    """Passed at least 80% of its runs."""
    UNSTABLE = "unstable"
    """Passed at least 50% of its runs."""
    HIGHLY_UNSTABLE = "highly_unstable"
    """Passed sometimes, under 50% of its runs."""
    CONSISTENTLY_FAILING = "consistently_failing"
    """Never passed: not flaky, just failing."""


def stability_class(rate: float) -> StabilityClass:
    """A case's :class:`StabilityClass` from its pass rate (0.0 to 1.0) over repeated runs:
    ``stable`` (100% passed), ``mostly_stable`` (>= 80%), ``unstable`` (>= 50%),
    ``highly_unstable`` (passed sometimes, < 50%) or ``consistently_failing`` (never passed)."""
    if rate >= 1.0:
        return StabilityClass.STABLE
    if rate <= 0.0:
        return StabilityClass.CONSISTENTLY_FAILING
    if rate >= 0.8:
        return StabilityClass.MOSTLY_STABLE
    if rate >= 0.5:
        return StabilityClass.UNSTABLE
    return StabilityClass.HIGHLY_UNSTABLE
