"""The services a conversation uses besides the agent under test.

:class:`FarmServices` implements the runner's ``Services`` and the assertions'
``AssertionEnv`` on top of a :class:`RoleCaller` — in-process here
(:class:`LocalRoles`), or the simulator and validator actor pools on Ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from farm.assertions import Outcome, Subject
from farm.cases import AssertionSpec, role_agent_id
from farm.config import FarmConfig
from farm.errors import FarmError, UnreadVerdict
from farm.results import Blame
from farm.roles.cache import RoleCache, timed
from farm.roles.player import RolePlayer
from farm.roles.types import VALIDATOR_ERROR, HumanRequest, RoleError, RoleRequest, SimulatorTurn, Verdict
from farm.scripts import ScriptResolver, call_maybe_async

if TYPE_CHECKING:
    from farm.traces.capture import ReceivedSpans

__all__ = ["ROLE_CONCURRENCY", "FarmServices", "LocalRoles", "RoleCaller"]


class RoleCaller(Protocol):
    """How the services reach the role agents; both raise :class:`RoleError` when a role fails."""

    async def simulate(self, request: RoleRequest) -> SimulatorTurn: ...

    async def validate(self, request: RoleRequest) -> Verdict: ...

    async def attribute(self, request: RoleRequest) -> tuple[Blame, str]: ...


#: Role calls of one kind (simulator, validator) in flight at once in one process.
ROLE_CONCURRENCY = 256


class LocalRoles:
    """Role players built from the config in this process, one per agent id.

    Simulator, validator and generator calls each have a budget of their own (``concurrency``
    calls in flight) and HTTP clients of their own, so a slow judge never takes a
    place or a connection from the agent under test. ``cache``: the role cache
    every player uses (unless its agent opts out); None: none.
    """

    def __init__(
        self,
        config: FarmConfig,
        limiter_for: Callable[[str], Any] | None = None,
        concurrency: int = ROLE_CONCURRENCY,
        cache: RoleCache | None = None,
    ):
        self.config = config
        self.limiter_for = limiter_for
        self.cache = cache
        self._players: dict[tuple[str, str, str | None], RolePlayer] = {}
        self._budget = {role: asyncio.Semaphore(concurrency) for role in ("simulator", "validator", "generator")}

    def player(self, role: str, agent_id: str, connector: str | None = None) -> RolePlayer:
        """The player of ``role`` by ``agent_id``; ``connector`` replaces the agent's own."""
        key = (role, agent_id, connector)
        if key not in self._players:
            try:
                self._players[key] = RolePlayer.from_config(role, self.config, agent_id, self.limiter_for, connector=connector, cache=self.cache)
            except (FarmError, OSError) as exc:
                raise RoleError(str(exc)) from None
        return self._players[key]

    async def simulate(self, request: RoleRequest) -> SimulatorTurn:
        async with self._budget["simulator"]:
            return await self.player("simulator", request.agent_id, request.connector).simulate(request.messages, request.metadata)

    async def validate(self, request: RoleRequest) -> Verdict:
        async with self._budget["validator"]:
            return await self.player("validator", request.agent_id, request.connector).validate(request.messages, request.metadata)

    async def attribute(self, request: RoleRequest) -> tuple[Blame, str]:
        """Whose failure a failed dynamic case is (the attributor, on the judges' budget)."""
        async with self._budget["validator"]:
            return await self.player("attributor", request.agent_id, request.connector).attribute(request.messages, request.metadata)

    async def generate(self, request: RoleRequest) -> list[Any]:
        """One batch of a generation (:data:`farm.generation.GenerateCall`): the raw cases the
        generator wrote for ``request.metadata``, through the role cache and the connector's limiter."""
        async with self._budget["generator"]:
            return await self.player("generator", request.agent_id, request.connector).generate(request.metadata)

    async def aclose(self) -> None:
        for player in self._players.values():
            await player.client.aclose()


HumanAsker = Callable[[HumanRequest], Awaitable[str | None]]


class FarmServices:
    """Simulator, validators, scripts and (optionally) a person, for the runner."""

    def __init__(
        self,
        config: FarmConfig,
        roles: RoleCaller,
        scripts: ScriptResolver | None = None,
        default_validator: str | None = None,
        human: HumanAsker | None = None,
        received_spans: ReceivedSpans | None = None,
    ):
        self.config = config
        self.roles = roles
        self.scripts = scripts or ScriptResolver(config.scripts_dir)
        self.default_validator = default_validator or config.farm.validator
        self.human = human
        self.received_spans = received_spans
        """Where a remote agent's spans arrive when not in this process (the ray engine's desk)."""

    @property
    def assertion_env(self) -> FarmServices:
        return self

    async def simulate(self, request: RoleRequest) -> SimulatorTurn:
        with timed("simulator", request):
            return await self.roles.simulate(request)

    async def attribute(self, request: RoleRequest) -> tuple[Blame, str]:
        with timed("attributor", request):
            return await self.roles.attribute(request)

    async def ask_human(self, request: HumanRequest) -> str | None:
        if self.human is None:
            return None
        return await self.human(request)

    async def run_hook(self, reference: str, payload: dict[str, Any]) -> Any:
        return await call_maybe_async(self.scripts.resolve(reference), payload)

    async def run_script_test(self, loaded: Any, result: Any) -> None:
        from farm.roles.scripttests import run_script_test

        await run_script_test(loaded, self.config, self, result)

    async def mock_tool(self, mock: Any, arguments: Any) -> Any:
        fn = self.scripts.resolve(mock)
        return await call_maybe_async(fn, arguments)

    async def validate(self, spec: AssertionSpec, subject: Subject) -> Outcome:
        agent_id = role_agent_id(spec.use, self.default_validator)
        if not agent_id:
            return Outcome(False, message="an 'agent' assertion needs 'use' (e.g. agents:workers.test.validator) or [farm].validator", error=True)
        options = spec.options.model_dump(exclude_none=True) if spec.options else {}
        metadata = {**subject.metadata, **options.get("metadata", {})}
        for key in ("criteria", "value"):
            if key == "value" and spec.value is not None and "criteria" not in metadata:
                metadata["criteria"] = spec.value
            elif spec.extra(key) is not None:
                metadata.setdefault(key, spec.extra(key))
        conversation = subject.conversation or [
            {"role": "user", "content": subject.input if isinstance(subject.input, str) else str(subject.input)},
            {"role": "assistant", "content": subject.content},
        ]
        try:
            request = RoleRequest(agent_id, conversation, metadata, connector=spec.options.connector if spec.options else None)
            with timed("validator", request):
                verdict = await self.roles.validate(request)
        except RoleError as exc:
            return Outcome(False, message=f"{VALIDATOR_ERROR}: {exc}", error=True)
        return Outcome(
            verdict.passed,
            actual=subject.content,
            message=None if verdict.passed else f"the validator judged it failed: {verdict.reason or 'no reason given'}",
            score=verdict.score,
            reason=verdict.reason,
            suggestions=verdict.suggestions,
        )

    async def run_script(self, spec: AssertionSpec, subject: Subject) -> Outcome:
        if not spec.use:
            return Outcome(False, message="a 'script' assertion needs 'script' or 'use' (e.g. scripts.tests.check)", error=True)
        try:
            fn = self.scripts.resolve(spec.use)
        except FarmError as exc:
            return Outcome(False, message=str(exc), error=True)
        options = spec.options.model_dump(exclude_none=True) if spec.options else {}
        value = await call_maybe_async(fn, subject.content, subject.input, options)
        if isinstance(value, bool):
            return Outcome(value, actual=subject.content, message=None if value else f"script {spec.use} returned false")
        try:
            verdict = Verdict.from_json(value)
        except UnreadVerdict as exc:
            return Outcome(False, message=f"script {spec.use} gave no verdict: {exc}", error=True)
        if verdict is not None:
            return Outcome(
                verdict.passed,
                actual=subject.content,
                message=None if verdict.passed else f"script {spec.use}: {verdict.reason or 'failed'}",
                score=verdict.score,
                reason=verdict.reason,
            )
        return Outcome(False, message=f"script {spec.use} returned {type(value).__name__}, not a bool, {{passed, reason, score}} or {{pass, message}}", error=True)
