"""The records that the runner, the role players and both engines exchange.

They live apart from the conversation runner so that a module needing one of
them (the role pools, the interactive desk, input generators) does not import
the conversation engine for a type.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from farm.errors import RoleError, UnreadVerdict
from farm.excerpts import clip
from farm.results import RoleCall, add_cost

__all__ = [
    "VALIDATOR_ERROR",
    "CallTally",
    "HumanRequest",
    "RoleError",
    "RoleOutcome",
    "RoleRequest",
    "SimulatorTurn",
    "Verdict",
]

T = TypeVar("T")

VALIDATOR_ERROR = "validator error"
"""How the message of an assertion starts when its judge failed (the role's error, not the agent's)."""


@dataclass(frozen=True)
class RoleRequest:
    """One simulator or validator call: the role agent that answers, what it is shown, and
    the connector it is reached on."""

    agent_id: str
    """The role agent's id (without ``agents:``)."""
    messages: list[dict[str, Any]]
    """The conversation so far, as OpenAI-style chat messages."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """What the role agent is told besides the conversation (its prompt's placeholders:
    the goal, the persona, the criteria, the turn counters...)."""
    connector: str | None = None
    """The connector this call uses instead of the role agent's own (``options.connector``)."""
    turn: int | None = None
    """For a simulator call: the turn whose input it is asked for."""


@dataclass
class CallTally:
    """Role calls made, how many of them the role cache answered, and what the others cost
    (:func:`farm.roles.cache.tally`)."""

    role_calls: int = 0
    cache_hits: int = 0
    cost_usd: float | None = None
    """USD the calls cost at their connectors' prices; None while no call had a price."""
    requests: int = 0
    """Requests that reached the role agents: a call the cache answered sends none, and one whose
    answer held no JSON, or that was repeated after a 5xx, sends more than one."""
    log: list[RoleCall] = field(default_factory=list)
    """Each call, timed (:func:`farm.roles.cache.timed`)."""

    def add(self, role_calls: int, cache_hits: int, cost_usd: float | None = None, requests: int = 0) -> None:
        self.role_calls += role_calls
        self.cache_hits += cache_hits
        self.cost_usd = add_cost(self.cost_usd, cost_usd)
        self.requests += requests


@dataclass
class SimulatorTurn:
    """The simulator's answer: the next user input, or that the goal is achieved."""

    input: Any = None
    goal_achieved: bool = False
    reasoning: str | None = None


@dataclass(frozen=True)
class Verdict:
    """A validator's judgement of the agent's latest response."""

    passed: bool
    score: float | None = None
    """From 0.0 to 1.0, when the validator gave one."""
    reason: str | None = None
    suggestions: list[str] | None = None

    @classmethod
    def from_json(cls, data: Any) -> Verdict | None:
        """The verdict in a validator's or a script's JSON answer: the farm's ``{passed, reason,
        score, suggestions}`` or Yao's ``{pass, message}``; None when ``data`` is no object with
        ``passed`` or ``pass``. A score that is no number is left out.

        ``passed`` must say true or false: a JSON boolean, or the words "true"/"false",
        "yes"/"no", "pass"/"fail", "passed"/"failed" as text. Anything else ("maybe", null, a
        number, an upstream error's text) is no verdict: :class:`UnreadVerdict` says what it was,
        so the caller makes it the judge's error. Read as false, a negated assertion would pass on it.
        """
        if not isinstance(data, dict) or ("passed" not in data and "pass" not in data):
            return None
        key = "passed" if "passed" in data else "pass"
        passed = _PASSED_WORDS.get(data[key].strip().lower()) if isinstance(data[key], str) else data[key]
        if not isinstance(passed, bool):
            said = clip(json.dumps(data[key], ensure_ascii=False, default=str), 80)
            raise UnreadVerdict(f"its '{key}' is {said}, not true or false")
        score = data.get("score")
        reason = data.get("reason", data.get("message"))
        suggestions = data.get("suggestions")
        return cls(
            passed=passed,
            score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
            reason=None if reason is None else str(reason),
            suggestions=[str(s) for s in suggestions] if isinstance(suggestions, list) else None,
        )


_PASSED_WORDS = {
    **dict.fromkeys(("true", "yes", "pass", "passed"), True),
    **dict.fromkeys(("false", "no", "fail", "failed"), False),
}
"""The words a ``passed`` written as text may be (lower-cased, trimmed)."""


@dataclass(frozen=True)
class RoleOutcome(Generic[T]):
    """A role call's answer, or the message of the :class:`RoleError` it raised.

    This is what a role pool on Ray returns. A raised error would arrive
    wrapped in Ray's own exception, its text carrying the remote traceback;
    as a record, the message the user reads is the same on both engines.
    """

    answer: T | None = None
    error: str | None = None
    """The :class:`RoleError`'s message; None when the call answered."""
    traceback: str | None = None
    """Where a python role agent raised (:attr:`RoleError.traceback`)."""
    calls: CallTally = field(default_factory=CallTally)
    """The role calls made to answer, and how many of them the role cache answered, for the
    case that asked."""

    @classmethod
    async def of(cls, call: Awaitable[T]) -> RoleOutcome[T]:
        """Await ``call``, keeping a :class:`RoleError` as the outcome's ``error``."""
        try:
            return cls(answer=await call)
        except RoleError as exc:
            return cls(error=str(exc), traceback=exc.traceback)

    def unwrap(self) -> T:
        """The answer; raises the :class:`RoleError` again when there is none."""
        if self.error is not None:
            error = RoleError(self.error)
            error.traceback = self.traceback
            raise error
        return self.answer  # type: ignore[return-value]  # None only for an answer of type None


@dataclass
class HumanRequest:
    """What a person at the terminal is asked to answer."""

    case_id: str
    turn: int
    question: str
    hint: str | None
    proposed: Any = None
    """The input the turn or the simulator would send; the person may keep or replace it."""
    timeout: float = 300.0
