"""The rows of the Parquet tables: one model per table, the one place a column is defined.

A run's ``cases.parquet``, ``turns.parquet`` and ``assertions.parquet`` hold
one :class:`CaseRow`, :class:`TurnRow` and :class:`AssertionRow` per row.
Each field is a column: its name, its type and, in the docstring under it,
its meaning. From these models come

- the Arrow schemas (:func:`farm.writers.arrowschema.arrow_schema`; ``CASES_SCHEMA``
  and the others in :mod:`farm.writers.parquet`),
- the rows themselves (``CaseRow.from_result`` and its siblings, which
  :func:`~farm.writers.parquet.rows_from_result` calls), and
- the column tables of ``docs/results.md`` (``python -m farm.writers.schema_doc``).

A column's Arrow type follows from its annotation: ``str`` is ``string``,
``float`` ``float64``, ``bool`` ``bool``, ``int`` ``int64`` unless it is
:data:`Int16` or :data:`Int32`, :data:`Timestamp` is ``timestamp[ms, UTC]``,
``list[X]`` a list of X, a row model a struct, and ``X | None`` is X (every
column may hold nulls). A :data:`JsonText` column holds any value as its JSON
text; a :data:`TextOrJson` column keeps text as it is and any other value as
JSON text.

**Adding a column** is one change here: add a field, with its docstring, to
the row model, at the place the column should take in the table. A field
named like a field of the record the row is built from (``CaseResult`` for
:class:`CaseRow`, ``TurnResult`` for :class:`TurnRow`, ``AssertionResult``
for :class:`AssertionRow`) is copied from it, and without a docstring of its
own it takes that field's; any other is given in the model's ``from_…``
builder. Then regenerate the doc's tables with
``python -m farm.writers.schema_doc`` (a test fails until they match). A
column that changes meaning or type bumps :data:`farm.results.SCHEMA_VERSION`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from operator import itemgetter
from typing import Annotated, Any, ClassVar, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.fields import FieldInfo

from farm.results._records import (
    AssertionResult,
    CaseResult,
    CheckpointResult,
    SpanRecord,
    Status,
    ToolCallRecord,
    TurnResult,
    clip_output,
)

__all__ = [
    "AssertionRow",
    "CaseRow",
    "Int16",
    "Int32",
    "JsonText",
    "KeyRow",
    "Row",
    "RowModel",
    "SpanRow",
    "TextOrJson",
    "Timestamp",
    "ToolCallRow",
    "TurnRow",
]


# One encoder for every row: json.dumps with options builds a new one per call, a cost on the hot path.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _json_text(value: Any) -> Any:
    return None if value is None else _ENCODER.encode(value)


def _text_or_json(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else _json_text(value)


class StoredAs(str):
    """A column's Arrow type by its name in the docs (``int16``, ``timestamp[ms, UTC]``), where its
    Python type alone would give another; :mod:`farm.writers.arrowschema` makes it the Arrow type,
    so that the row models (and a run, until it builds a table) need no pyarrow."""


#: An integer column stored as int16 (``int`` alone is int64).
Int16 = Annotated[int, StoredAs("int16")]
#: An integer column stored as int32.
Int32 = Annotated[int, StoredAs("int32")]
#: A point in time, stored in milliseconds, UTC.
Timestamp = Annotated[datetime, StoredAs("timestamp[ms, UTC]")]
#: Any value, stored as its JSON text (``json.loads`` gives it back); None stays a null.
JsonText = Annotated[str, BeforeValidator(_json_text)]
#: Text kept as it is; any other value stored as its JSON text.
TextOrJson = Annotated[str, BeforeValidator(_text_or_json)]



Row = dict[str, Any]
"""A row as Arrow takes it: column name to value (in no set order: Arrow takes columns by name)."""


class RowModel(BaseModel):
    """A table's row model (or a struct's, as :class:`ToolCallRow`): one field per column.

    The writer makes rows by the thousand from records that pydantic has
    validated already, so :meth:`_row` builds each as a plain dict, not as an
    instance; what a model would add at that point is only its cost.
    ``Model.model_validate(row)`` checks a row where that is wanted (the tests),
    so pydantic builds a model's validator then (``defer_build``), not at import.

    A field's docstring is its column's meaning; only the docs need it, so it is read from the
    source there (:func:`farm.writers.schema_doc.column_docs`), not at every start of the farm.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    #: The record whose same-named fields fill the row, and lend their docstrings to
    #: the row's fields that have none in the docs (see the module docstring).
    built_from: ClassVar[type[BaseModel] | None] = None

    # Worked out once per model, from its fields:
    _copied: ClassVar[tuple[str, ...]] = ()
    _take: ClassVar[Callable[[dict[str, Any]], tuple[Any, ...]]]
    _conversions: ClassVar[tuple[tuple[str, Callable[[Any], Any]], ...]] = ()
    _defaults: ClassVar[Row] = {}
    _width: ClassVar[int] = 0

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields
        record_fields = cls.built_from.model_fields if cls.built_from else {}
        cls._copied = tuple(name for name in fields if name in record_fields)
        cls._take = _taker(cls._copied)
        cls._conversions = tuple((name, convert) for name, field in fields.items() if (convert := _conversion(field)))
        cls._defaults = {name: field.default for name, field in fields.items() if not field.is_required()}
        cls._width = len(fields)

    @classmethod
    def _row(cls, record: BaseModel | None, given: Row) -> Row:
        """The row of ``record``'s same-named fields and ``given`` (which wins), defaults for the rest."""
        row = cls._defaults.copy()
        if record is not None:
            # zip(strict=True) would double the cost; _take gives exactly one value per name
            row.update(zip(cls._copied, cls._take(record.__dict__)))  # noqa: B905
        row.update(given)
        if len(row) != cls._width:  # a cheap check for the likely slip; the tests validate whole rows
            missing = [name for name in cls.model_fields if name not in row]
            unknown = [name for name in row if name not in cls.model_fields]
            raise TypeError(f"{cls.__name__} was built without the columns {missing}, with unknown ones {unknown}.")
        for name, convert in cls._conversions:
            row[name] = convert(row[name])
        return row


def _taker(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A function that takes the values of ``names`` from a record's ``__dict__``, as a tuple.

    A pydantic model keeps its field values in ``__dict__``: one ``itemgetter`` call takes them all."""
    if len(names) > 1:
        return itemgetter(*names)
    return lambda values: tuple(values[name] for name in names)


def _conversion(field: FieldInfo) -> Callable[[Any], Any] | None:
    """What a :data:`JsonText` or :data:`TextOrJson` field (optional or not) does to a value."""
    # pydantic keeps the metadata of a field's outer Annotated on the field, an inner one (X | None) in place
    inner = [getattr(arg, "__metadata__", ()) for arg in get_args(field.annotation)]
    for meta in [*field.metadata, *(meta for metadata in inner for meta in metadata)]:
        if isinstance(meta, BeforeValidator):
            return meta.func  # type: ignore[return-value]
    return None


class KeyRow(RowModel):
    """The columns that start every table: :data:`~farm.results.CASE_RUN_KEY` (``run_id``,
    ``run_index``, ``attempt``, ``suite``, ``case_id``, ``agent``) joins them."""

    run_id: str
    """The run; never null."""
    run_index: Int32
    """Which of ``--runs N`` repetitions (0-based)."""
    attempt: Int32
    """1, or more when a worker died or ``--retries`` ran the case again."""
    suite: str | None
    """The suite of the case as the run named it: its file without the line (``suites/a.jsonl``),
    ``<stdin>``, ``<message>``, or its generator (``agents:<id>``). A case id may repeat across a
    run's suites: with ``case_id`` it names the case. The reader (``farm.results``) gives the suite
    as it pairs cases across runs (a file relative to the project folder); null in a run written
    before schema 7, whose ids were unique."""
    case_id: str
    """The case id."""
    agent: str | None
    """The agent under test that ran the case (a run may test several)."""

    @staticmethod
    def of(result: CaseResult) -> Row:
        """The key columns of ``result``'s rows."""
        return {
            "run_id": result.run_id,
            "run_index": result.run_index,
            "attempt": result.attempt,
            "suite": result.suite,
            "case_id": result.id,
            "agent": result.agent,
        }


class CaseRow(KeyRow):
    """One row of ``cases.parquet``: one case run."""

    built_from = CaseResult

    name: str | None
    status: str
    mode: str | None
    """``single``, ``static`` or ``dynamic``; null when the case did not load."""
    tags: list[str]
    """The case's tags (empty list when none)."""
    source: str | None
    total_turns: Int32
    """Turns taken."""
    duration_ms: float
    """Wall time of the case."""
    error: str | None
    """Why it failed, errored, timed out or was skipped, in one sentence."""
    ended_by: str | None
    """Which side ended the conversation early: ``agent``, ``simulator``, ``tool_mock``, ``case_timeout`` or
    ``unreachable`` (the agent's connector never answered: the run stopped); null when
    it ended normally or an assertion stopped it."""
    error_role: str | None
    """The role whose failure made the case an ``error``: ``simulator``, ``validator``, ``generator`` or
    ``reporter``; null when the agent, the case or nothing went wrong."""
    blame: str | None
    """Whose failure a failed dynamic case is: ``agent``, ``simulator``, ``checkpoint`` or ``unknown``; null otherwise."""
    blame_reason: str | None
    """Why, in one sentence."""
    awaiting_question: str | None
    """The agent's question, when the case stopped because the agent awaited input."""
    hint: str | None
    prompt_tokens: int
    """Prompt tokens the target agent reported over the case."""
    completion_tokens: int
    """Completion tokens, likewise."""
    total_tokens: int
    """Total tokens, likewise."""
    cached_tokens: int
    """Of ``prompt_tokens``, those the API served from its prompt cache."""
    cost_usd: float | None
    """What the agent under test cost over the case, in USD at its connector's ``price``; null without one."""
    role_cost_usd: float | None
    """What the case's simulator and validator calls cost, in USD at their connectors' prices; null when none has
    a ``price``. Not part of ``cost_usd``."""
    assertions_passed: Int32
    """Turn and final assertions that passed (checkpoints not counted)."""
    assertions_failed: Int32
    """Turn and final assertions that did not pass, errored ones included."""
    checkpoints_reached: Int32
    """Dynamic-mode checkpoints reached."""
    checkpoints_total: Int32
    """Dynamic-mode checkpoints defined (0 for other modes)."""
    started_at: Timestamp | None
    """When the case started."""
    worker: str | None
    trace_id: str | None
    """The case run's trace (32 hex digits) when the run captured or exported traces (``--otlp``):
    what finds it in a tracing backend; null otherwise."""
    rescorable: bool | None
    """``farm rescore``: false when the case could not be rescored (its inputs changed, or it needs turns the
    run did not record); null in a live run."""
    retried: Int32
    """Earlier attempts that ended in an agent error or timeout and that ``--retries`` ran again (their errors
    are in the JSONL's ``retried``)."""
    role_calls: Int32
    """Calls made for the case that the role cache could answer (role calls, and the agent's with ``cache = true``)."""
    cache_hits: Int32
    """Of ``role_calls``, those the role cache answered."""
    stopped: str | None
    """Under adaptive repeats, on a case's last try: ``decided_above``, ``decided_below`` or ``max_tries``."""
    tries: Int32 | None
    """With ``stopped``: the case's tries."""
    verdict: str | None
    """With ``stopped``: ``above`` or ``below`` the gate."""
    schema_version: Int16
    """Version of the result record's shape."""

    @classmethod
    def from_result(cls, result: CaseResult) -> Row:
        """``result``'s row: its own fields, its token usage, and how many of its assertions
        passed and failed and of its checkpoints were reached."""
        scored = [a for turn in result.turns for a in turn.assertions] + list(result.final_assertions)
        passed = sum(1 for a in scored if a.passed)
        usage = result.usage
        return cls._row(
            result,
            {
                **KeyRow.of(result),
                "status": Status(result.status).value,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "cached_tokens": usage.cached_tokens,
                "assertions_passed": passed,
                "assertions_failed": len(scored) - passed,
                "checkpoints_reached": sum(1 for c in result.checkpoints if c.reached),
                "checkpoints_total": len(result.checkpoints),
                "retried": len(result.retried),
                "started_at": None if result.started_at is None else datetime.fromtimestamp(result.started_at, UTC),
            },
        )


class ToolCallRow(RowModel):
    """One tool call in a turn's ``tool_calls``."""

    built_from = ToolCallRecord

    id: str | None
    """The agent's call id."""
    name: str
    args: JsonText | None
    """JSON text."""
    result: JsonText | None
    """JSON text: what the farm answered."""
    mocked: bool

    @classmethod
    def from_record(cls, call: ToolCallRecord) -> Row:
        """``call`` as a ``tool_calls`` struct (its ``step`` is no column)."""
        return cls._row(call, {})


class TurnRow(KeyRow):
    """One row of ``turns.parquet``: one turn."""

    built_from = TurnResult

    turn: Int32
    input: TextOrJson | None
    """What the user sent: the text itself, or JSON text when structured."""
    input_source: str
    output: str
    """The agent's reply content, cut at 65536 characters."""
    output_chars: int | None
    """The reply's whole length in characters when ``output`` was cut; null when it was kept whole."""
    tool_calls: list[ToolCallRow]
    """The turn's tool calls in order."""
    awaiting_input: bool
    awaiting_reason: str
    input_hint: str | None
    duration_ms: float
    """The agent's time in the turn, all its steps included, without waits for rate-limit permits."""
    queued_ms: float
    """Time the turn waited for rate-limit permits."""
    prompt_tokens: int
    """Prompt tokens the agent reported for the turn."""
    completion_tokens: int
    """Completion tokens, likewise."""
    total_tokens: int
    """Total tokens, likewise."""
    cached_tokens: int
    """Of ``prompt_tokens``, those the API served from its prompt cache."""
    cost_usd: float | None
    """What the turn's agent calls cost, in USD at the serving connector's ``price``; null without one."""
    steps: Int32
    """Agent calls in the turn (more than one when tool mocks were answered)."""
    retries: Int32
    """Requests repeated in the turn (429, 5xx, connection errors), all steps together, those of a call
    that failed in the end included ("after 3 requests": 2)."""
    truncated: bool
    """Whether a reply of the turn was cut at the model's token limit (``finish_reason: length``)."""
    note: str | None
    """What is worth knowing about the turn that is no error, e.g. "stopped after 8 tool steps" when the
    tool loop hit ``max_tool_steps``."""
    simulator_reasoning: str | None
    sim_flags: list[str]
    """What the simulator did wrong in the turn (``empty``, ``repeat``, ``as_assistant``,
    ``recites_checkpoint``, ``early_end``); empty when nothing."""
    error: str | None
    traceback: str | None
    """Where an in-process agent raised in the turn: its own frames, masked of secrets, at most 8000
    characters; null otherwise."""

    @classmethod
    def from_turn(cls, key: Row, turn: TurnResult) -> Row:
        """``turn``'s row under the case's ``key`` (:meth:`KeyRow.of`); ``output`` cut to its limit."""
        output, output_chars = clip_output(turn.output)
        usage = turn.usage
        return cls._row(
            turn,
            {
                **key,
                "output": output,
                # a turn read back from a row that was cut already keeps its whole length
                "output_chars": output_chars if turn.output_chars is None else turn.output_chars,
                "tool_calls": [ToolCallRow.from_record(call) for call in turn.tool_calls],
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "cached_tokens": usage.cached_tokens,
            },
        )


class AssertionRow(KeyRow):
    """One row of ``assertions.parquet``: one assertion result or checkpoint."""

    built_from = AssertionResult

    scope: str
    """``turn``, ``final`` or ``checkpoint``."""
    turn: Int32 | None
    """The turn checked; for a checkpoint the turn it was reached at; null for ``final`` and unreached
    checkpoints."""
    checkpoint_id: str | None = None
    """The checkpoint's id; null unless ``scope`` is ``checkpoint``."""
    position: Int32
    """0-based place in its list (the turn's assertions, the final assertions, or the checkpoints)."""
    type: str | None = None
    """The assertion type, e.g. ``contains``; null for a checkpoint that was never checked."""
    passed: bool
    """Whether it passed (after ``negate``); for a checkpoint, whether it was reached."""
    negate: bool = False
    error: bool = False
    """True when it could not be evaluated at all (not a plain failure)."""
    expected: JsonText | None = None
    """What it expected, as JSON text."""
    actual: JsonText | None = None
    """What was found, as JSON text (truncated to a few hundred characters)."""
    message: str | None = None
    """Why it failed (or the user's ``message``); null when it passed."""
    score: float | None = None
    reason: str | None = None
    suggestions: list[str] | None = None
    matched_by: str | None = None
    diff: str | None = None
    """For ``golden``: the unified diff of the turn's reply and tool calls against the golden conversation."""
    required: bool | None = None
    """Whether the checkpoint is required; null unless a checkpoint."""
    description: str | None = None
    """The checkpoint's description; null unless a checkpoint."""

    @classmethod
    def from_assertion(
        cls, key: Row, scope: str, turn: int | None, position: int, assertion: AssertionResult
    ) -> Row:
        """``assertion``'s row under the case's ``key``: ``scope`` and ``turn`` say where it was
        checked, ``position`` its place there."""
        return cls._row(assertion, {**key, "scope": scope, "turn": turn, "position": position})

    @classmethod
    def from_checkpoint(cls, key: Row, position: int, checkpoint: CheckpointResult) -> Row:
        """A checkpoint's row: ``passed`` says whether it was reached, whatever its last check said."""
        return cls._row(
            checkpoint.assertion,
            {
                **key,
                "scope": "checkpoint",
                "turn": checkpoint.reached_at_turn,
                "checkpoint_id": checkpoint.id,
                "position": position,
                "passed": checkpoint.reached,
                "required": checkpoint.required,
                "description": checkpoint.description,
            },
        )


class SpanRow(KeyRow):
    """One row of ``spans.parquet``: one span the agent made (docs/traces.md). The table is written
    only by a run that captured a span."""

    built_from = SpanRecord

    turn: Int32
    """The turn the span was made in."""
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    operation: str | None
    tool_name: str | None
    start: Timestamp
    """When the span started."""
    duration_ms: float
    status: str
    """``unset``, ``ok`` or ``error``."""
    status_message: str | None
    attributes: JsonText
    """The span's attributes as JSON text, secrets masked and long values cut."""

    @classmethod
    def from_span(cls, key: Row, turn: int, span: SpanRecord) -> Row:
        """``span``'s row under the case's ``key``, made in ``turn``."""
        return cls._row(span, {**key, "turn": turn, "start": datetime.fromtimestamp(span.start, UTC)})
