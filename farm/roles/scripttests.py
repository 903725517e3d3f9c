"""Script tests: ``farm test -i scripts.<module>`` runs each ``test_*(t, ctx)``.

``t`` offers the seed's ``t.assert.*`` family as Python (``t.assert_``),
``t.log``, ``t.skip`` and ``t.fail``; ``ctx.agent("id").send(...)`` calls an
agent. Test functions may be sync (they run in a thread, so they may block) or
async (then use ``await ctx.agent("id").asend(...)`` and
``await t.assert_.aagent(...)``). A failed ``t.assert_`` is recorded and the
test goes on (like pytest-check); ``t.fail`` and ``t.skip`` stop it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from farm.agents.base import AgentClient, Reply
from farm.agents.factory import build_agent
from farm.assertions import Subject, evaluate
from farm.cases import AssertionSpec, TestCase
from farm.config import FarmConfig
from farm.jsontext import as_text
from farm.loaded import LoadedCase
from farm.results import AssertionResult, CaseResult, Status, TurnResult, add_cost
from farm.scripts import ScriptResolver
from farm.suite.loader import Suite

if TYPE_CHECKING:
    from farm.suite.sources import Loading

__all__ = ["ScriptTests", "load_script_tests", "run_script_test", "T", "Ctx"]


@dataclass(frozen=True)
class ScriptTests:
    """``scripts.<module>``: script tests as a source of cases (:class:`~farm.suite.sources.CaseSource`),
    one case per ``test_*`` function."""

    value: str
    kind: Literal["script-tests"] = "script-tests"

    def load(self, loading: Loading) -> Suite:
        return load_script_tests(self.value.removeprefix("scripts."), loading.config)


def load_script_tests(module: str, config: FarmConfig) -> Suite:
    """One case per ``test_*`` function of ``scripts_dir/<module>.py``, in file order."""
    mod = ScriptResolver(config.scripts_dir).resolve_module(module)
    functions = [
        (name, fn)
        for name, fn in vars(mod).items()
        if name.startswith("test_") and callable(fn) and getattr(fn, "__module__", None) == mod.__name__
    ]
    functions.sort(key=lambda item: item[1].__code__.co_firstlineno)
    cases = []
    for name, fn in functions:
        case_id = f"{module}.{name}"
        doc = (inspect.getdoc(fn) or "").split("\n")[0] or None
        case = TestCase(id=case_id, name=doc or name, input=f"scripts.{case_id}", tags=["script"])
        source = f"{mod.__file__}:{fn.__code__.co_firstlineno}"
        # a script test may call any agent or validator: give it both role pools
        cases.append(LoadedCase(id=case_id, source=source, case=case, script=f"{module}:{name}", base_dir=str(config.base_dir), needs=(True, True)))
    return Suite(cases, f"scripts.{module} ({len(cases)} script tests)")


class _Stop(Exception):
    def __init__(self, status: Status, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _Bridge:
    """Runs the farm's async calls from a sync test function's thread, on the actor's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop

    def run(self, coro: Any) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise RuntimeError("in an async test, use the a-prefixed methods (await ctx.agent(id).asend(...))")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class AgentHandle:
    def __init__(self, ctx: Ctx, agent_id: str):
        self.ctx = ctx
        self.agent_id = agent_id

    async def asend(self, message: Any, options: dict[str, Any] | None = None) -> Reply:
        """Send a message (a string, or a list of messages) and record the exchange as a turn."""
        messages = [{"role": "user", "content": message}] if isinstance(message, str) else list(message)
        client = self.ctx.client(self.agent_id)
        started = time.perf_counter()
        reply = await client.send(messages, options or {})
        turn = TurnResult(
            turn=len(self.ctx.result.turns) + 1,
            input=message,
            output=reply.content,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            usage=reply.usage,
            cost_usd=reply.cost_usd,
        )
        self.ctx.result.turns.append(turn)
        self.ctx.result.usage = self.ctx.result.usage + reply.usage
        self.ctx.result.cost_usd = add_cost(self.ctx.result.cost_usd, reply.cost_usd)
        return reply

    def send(self, message: Any, options: dict[str, Any] | None = None) -> Reply:
        """:meth:`asend` from a sync test."""
        return self.ctx.bridge.run(self.asend(message, options))


class Ctx:
    """What a script test uses to reach agents."""

    def __init__(self, config: FarmConfig, result: CaseResult, bridge: _Bridge, default_agent: str | None):
        self.config = config
        self.result = result
        self.bridge = bridge
        self.default_agent = default_agent
        self._clients: dict[str, AgentClient] = {}

    def client(self, agent_id: str) -> AgentClient:
        if agent_id not in self._clients:
            self._clients[agent_id] = build_agent(self.config, agent_id)
        return self._clients[agent_id]

    def agent(self, agent_id: str | None = None) -> AgentHandle:
        """An agent by id (default: the run's target agent)."""
        chosen = agent_id or self.default_agent
        if not chosen:
            raise ValueError("ctx.agent() needs an agent id (no target agent in this run)")
        return AgentHandle(self, chosen)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


class Assert:
    """``t.assert_``: each method records an assertion result and returns whether it passed.

    ``t.assert_(condition, message)`` itself is :meth:`true`, as Python's ``assert``
    reads; a failed one is recorded and the test goes on (the case fails).
    """

    def __init__(self, t: T):
        self.t = t

    def __call__(self, condition: Any, message: str | None = None) -> bool:
        """Passes when ``condition`` is true; ``message`` is the failure's text."""
        return self.true(condition, message)

    def _record(self, result: AssertionResult) -> bool:
        self.t.results.append(result)
        return result.passed

    def _check(self, spec: dict[str, Any], content: Any, document: Any = None) -> bool:
        subject = Subject(content=as_text(content, ensure_ascii=True), document=document)
        return self._record(self.t.bridge.run(evaluate(AssertionSpec.model_validate(spec), subject)))

    def contains(self, text: Any, value: str, message: str | None = None) -> bool:
        """``value`` is a substring of ``text`` (a reply's content, or any value as text)."""
        return self._check({"type": "contains", "value": value, "message": message}, _content(text))

    def not_contains(self, text: Any, value: str, message: str | None = None) -> bool:
        """``value`` is not a substring of ``text``."""
        return self._check({"type": "not_contains", "value": value, "message": message}, _content(text))

    def equal(self, actual: Any, expected: Any, message: str | None = None) -> bool:
        """``actual == expected``."""
        passed = actual == expected
        return self._record(AssertionResult(type="equals", expected=expected, actual=actual, passed=passed, message=None if passed else (message or f"expected {expected!r}, got {actual!r}")))

    def regex(self, text: Any, pattern: str, message: str | None = None) -> bool:
        """``pattern`` is found in ``text`` (Python syntax, as the ``regex`` assertion)."""
        return self._check({"type": "regex", "pattern": pattern, "message": message}, _content(text))

    def json_path(self, data: Any, path: str, value: Any, message: str | None = None) -> bool:
        """The JSONPath ``path`` in ``data`` (a dict or list, or a reply whose content holds JSON) equals ``value``."""
        document = data if not isinstance(data, (str, Reply)) else None
        return self._check({"type": "json_path", "path": path, "value": value, "message": message}, _content(data), document)

    def true(self, value: Any, message: str | None = None) -> bool:
        """``value`` is true."""
        return self._record(AssertionResult(type="true", actual=value, passed=bool(value), message=None if value else (message or "expected a true value")))

    def not_nil(self, value: Any, message: str | None = None) -> bool:
        """``value`` is not None."""
        passed = value is not None
        return self._record(AssertionResult(type="not_nil", actual=value, passed=passed, message=None if passed else (message or "expected a value, got None")))

    async def aagent(self, response: Any, role_agent_id: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """An LLM validator judges ``response``; returns ``{passed, score, reason, suggestions}``."""
        if self.t.services is None:
            raise _Stop(Status.ERROR, "t.assert_.agent needs a validator service")
        spec = AssertionSpec.model_validate({"type": "agent", "use": f"agents:{role_agent_id}", "options": options or {}})
        content = _content(response)
        result = await evaluate(spec, Subject(content=content, input=None), self.t.services.assertion_env)
        self._record(result)
        return {"passed": result.passed, "score": result.score, "reason": result.reason, "suggestions": result.suggestions}

    def agent(self, response: Any, role_agent_id: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`aagent` from a sync test."""
        return self.t.bridge.run(self.aagent(response, role_agent_id, options))


class T:
    """The test object a script test receives."""

    def __init__(self, bridge: _Bridge, services: Any):
        self.bridge = bridge
        self.services = services
        self.results: list[AssertionResult] = []
        self.logs: list[str] = []
        self.assert_ = Assert(self)

    def log(self, *parts: Any) -> None:
        """A line for the result's ``logs``."""
        self.logs.append(" ".join(str(p) for p in parts))

    def skip(self, reason: str = "skipped by the test") -> None:
        """Stop the test: the case is skipped with ``reason``."""
        raise _Stop(Status.SKIPPED, reason)

    def fail(self, reason: str = "failed by the test") -> None:
        """Stop the test: the case fails with ``reason``."""
        raise _Stop(Status.FAILED, reason)


def _content(value: Any) -> str:
    return value.content if isinstance(value, Reply) else as_text(value, ensure_ascii=True)


async def run_script_test(loaded: LoadedCase, config: FarmConfig, services: Any, result: CaseResult) -> None:
    """Run one script test, filling ``result`` (status, turns, assertions)."""
    module, _, name = (loaded.script or "").partition(":")
    fn: Callable[..., Any] = getattr(ScriptResolver(config.scripts_dir).resolve_module(module), name)
    bridge = _Bridge(asyncio.get_running_loop())
    t = T(bridge, services)
    ctx = Ctx(config, result, bridge, result.agent)
    try:
        if inspect.iscoroutinefunction(fn):
            await fn(t, ctx)
        else:
            await asyncio.to_thread(fn, t, ctx)
        failed = [r for r in t.results if not r.passed]
        if failed:
            result.status, result.error = Status.FAILED, failed[0].message
    except _Stop as stop:
        result.status, result.error = stop.status, stop.reason
    except AssertionError as exc:  # a plain `assert` in the test
        result.status, result.error = Status.FAILED, str(exc) or "assertion failed"
    except Exception as exc:
        result.status, result.error = Status.ERROR, f"{type(exc).__name__}: {exc}"
    finally:
        await ctx.aclose()
        result.final_assertions = t.results
        result.total_turns = len(result.turns)
        result.logs = t.logs

