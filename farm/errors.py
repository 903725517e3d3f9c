"""Every error the farm raises on purpose, in one hierarchy.

::

    FarmError                      a user's mistake: one sentence, never a traceback
    ├── UsageError                 found before anything runs (a flag, the config, a reference): exit 2
    │   ├── ConfigError                farm.toml's mistakes, every one (``problems``: file:line each)
    │   └── Unplaceable                an agent asks more per slot than any node of the Ray cluster has
    ├── InputError                 test input that cannot be loaded at all (``problems``: file:line each)
    ├── CaseRuleError              a case breaks a rule of the format a schema cannot state (also a ValueError)
    ├── InvalidPattern             a test's regex does not compile (also a ValueError): a suite problem, or the assertion's error
    ├── NotFound                   ``farm view``: a run, case or page the results folder does not hold (404)
    └── BadRequest                 ``farm view``: a query parameter the endpoint cannot use (400)

    CaseError                      ends one case (its ``error``), never the run
    ├── AgentError                 the agent under test failed
    │   ├── AgentHTTPError             it answered an HTTP error (``status_code``, ``retry_after``)
    │   ├── AgentConnectionError       no answer: connection refused, reset, ...
    │   │   ├── AgentTimeoutError          the connector's timeout ran out on every attempt (status ``timeout``)
    │   │   ├── EndpointUnreachable        the connector never answered and keeps refusing: the run stops
    │   │   └── LimiterUnavailable         the connector's rate limiter cannot be reached
    │   ├── AgentResponseError         an answer the farm cannot read
    │   │   └── AgentReplyTooLargeError    larger than ``max_reply_bytes``
    │   └── RecordingEnds              a rescore needs more of a conversation than the run recorded
    └── RoleError                  a simulator, validator, generator or reporter failed

    RunError                       stops the run, no case's fault: the results so far are kept
    ├── EngineLost                 the engine went away (the Ray node running the farm stopped)
    └── RunInterrupted             Ctrl-C or SIGTERM: carries the run's summary
        └── RunStopped                 ... because the engine went away (EngineLost)

    TransportError                 beneath the agent clients: no HTTP answer (turned into an AgentError)
    ReplyTooLarge                  a 2xx body past the limit (turned into AgentReplyTooLargeError)
    LimiterRestarting              the rate limiter is being replaced: ask again shortly (never reaches a user)
    PatternTimeout                 a test's regex searched past its time (turned into that assertion's failure)
    UnreadVerdict                  a judge's or a script's ``passed`` says neither true nor false (turned into its error)

An interrupt (Ctrl-C, SIGTERM) is ``KeyboardInterrupt`` until :func:`farm._run.execution.execute` turns it
into ``RunInterrupted`` (``RunStopped`` when the engine was lost), which carries the run's summary.

Messages say what was attempted and what blocked it, and where a user can act, what to do.
The classes are importable from the modules that raise them too (``farm.agents.base``,
``farm.roles.types``, ``farm.engines``, ...). Six are defined where they are used, as subclasses of
this tree: ``CaseRuleError`` in :mod:`farm.cases`, ``NotFound`` in :mod:`farm.view.folders`,
``BadRequest`` in :mod:`farm.view.server`, ``RunInterrupted`` and ``RunStopped`` in
:mod:`farm._run.execution`, ``Unplaceable`` in ``farm.actors.placement``. Exceptions private to a
module (a ``_Stop`` that ends a loop early) are signals inside it, not errors, and stay outside.
"""

from __future__ import annotations

__all__ = [
    "AgentConnectionError",
    "AgentError",
    "AgentHTTPError",
    "AgentReplyTooLargeError",
    "AgentResponseError",
    "AgentTimeoutError",
    "CaseError",
    "ConfigError",
    "EndpointUnreachable",
    "EngineLost",
    "FarmError",
    "InputError",
    "InvalidPattern",
    "LimiterRestarting",
    "LimiterUnavailable",
    "PatternTimeout",
    "RecordingEnds",
    "ReplyTooLarge",
    "RoleError",
    "RunError",
    "TransportError",
    "UnreadVerdict",
    "UsageError",
]


class FarmError(Exception):
    """Base of every error the farm raises on purpose."""


class UsageError(FarmError):
    """A command line, config or reference the farm cannot use; nothing was run."""


class ConfigError(UsageError):
    """``farm.toml``'s mistakes, every one; ``problems`` lists ``file:line: what is wrong``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(_first_of(problems, "farm.toml cannot be read"))


class InputError(FarmError):
    """Test input that cannot be loaded; ``problems`` lists ``file:line: what is wrong``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(_first_of(problems, "the input cannot be loaded"))


def _first_of(problems: list[str], otherwise: str) -> str:
    """An error's message for a list of problems: the first, and how many more (``otherwise``: none listed)."""
    head = problems[0] if problems else otherwise
    return head + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


class CaseError(Exception):
    """Something that ends one case, recorded as its ``error``; the rest of the run goes on."""

    traceback: str | None = None
    """Where an in-process (``python``) agent or role raised: its own frames, masked of secrets and
    bounded (:func:`farm.agents.python.user_traceback`); None otherwise."""


class AgentError(CaseError):
    """A call to an agent failed."""

    retries: int = 0
    """Requests repeated before the call gave up (after a 429, a 5xx or a broken connection):
    a turn records what was really sent, its failed requests included."""


class AgentHTTPError(AgentError):
    """The agent answered with an HTTP error."""

    def __init__(self, message: str, status_code: int, retry_after: float | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after

    def __reduce__(self):  # so the error survives pickling across Ray
        return (type(self), (str(self), self.status_code, self.retry_after), self.__dict__)


class AgentConnectionError(AgentError):
    """No answer came from the agent."""


class AgentTimeoutError(AgentConnectionError):
    """The connector's timeout ran out on every attempt: the turn ends as ``timeout``."""


class EndpointUnreachable(AgentConnectionError):
    """The connector has never answered in this process and its requests keep failing to connect:
    nothing listens there (``farm.agents.retry``). The case ends, and the run stops dispatching."""


class LimiterUnavailable(AgentConnectionError):
    """The connector's limiter cannot be reached, so no request may start."""


class AgentResponseError(AgentError):
    """The agent answered something the farm cannot read."""


class AgentReplyTooLargeError(AgentResponseError):
    """The reply grew past ``max_reply_bytes`` (decompressed) and was not read further."""


class RecordingEnds(AgentError):
    """The replay asked for more of the conversation than the run recorded."""


class RoleError(CaseError):
    """A role agent (simulator, validator, ...) failed or answered nothing usable."""


class TransportError(Exception):
    """No answer came. ``reason`` says why in words; ``retryable``: another attempt may work;
    ``maybe_served``: the endpoint may have done the work (it timed out while answering);
    ``timed_out``: the connector's timeout ran out while waiting for the answer; ``connect_failed``:
    no connection could be made at all (refused, no route, the connect timeout)."""

    def __init__(self, reason: str, *, retryable: bool, maybe_served: bool = False, timed_out: bool = False, connect_failed: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.maybe_served = maybe_served
        self.timed_out = timed_out
        self.connect_failed = connect_failed

    def __reduce__(self):  # keyword-only fields: pickle them by name
        return (_transport_error, (self.reason, self.retryable, self.maybe_served, self.timed_out, self.connect_failed))


def _transport_error(reason: str, retryable: bool, maybe_served: bool, timed_out: bool, connect_failed: bool = False) -> TransportError:
    return TransportError(reason, retryable=retryable, maybe_served=maybe_served, timed_out=timed_out, connect_failed=connect_failed)


class ReplyTooLarge(Exception):
    """The body of a 2xx answer is larger than ``limit`` bytes (decompressed); it was not read further."""

    def __init__(self, limit: int):
        super().__init__(f"the reply is larger than {limit} bytes")
        self.limit = limit


class LimiterRestarting(Exception):
    """The connector's limiter is being replaced (a restarting actor): ask again shortly."""


class UnreadVerdict(Exception):
    """A judge's or a script's answer has ``passed`` (or ``pass``) that says neither true nor false;
    the message says what it said (``its 'passed' is "maybe", not true or false``)."""


class PatternTimeout(Exception):
    """A pattern searched longer than it was allowed (catastrophic backtracking, most likely)."""

    def __init__(self, pattern: str, seconds: float):
        super().__init__(f"regex /{pattern}/ ran past {_seconds(seconds)} without finishing (catastrophic backtracking?)")
        self.pattern = pattern
        self.seconds = seconds


class InvalidPattern(FarmError, ValueError):
    """A pattern the ``regex`` package cannot compile; the message is the package's."""


def _seconds(value: float) -> str:
    return f"{value:g}s" if value >= 1 else f"{value * 1000:.0f}ms"


class RunError(Exception):
    """Something that stops the whole run through no case's fault; the results so far are kept."""


class EngineLost(RunError):
    """The engine itself went away mid-run (the Ray node running the farm stopped): no case's
    fault. The results so far are kept; the cases in flight are left for ``--resume``."""
