"""The conversation runner: one case, from its first turn to its last (docs/reference/cases.md).

Engine-agnostic: it talks to the agent under test through ``AgentClient`` and
to everything else (simulator, validators, a human, scripts) through the
:class:`Services` it is given. In a Ray run those services are actor pools; in
a unit test they are plain objects.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from farm.agents.base import AgentClient, AgentError, AgentTimeoutError
from farm.agents.permits import waiting_for_permits
from farm.assertions import AssertionEnv, Subject, describe, evaluate
from farm.assertions.traces import TRACE_TYPES
from farm.cases import AssertionSpec, Checkpoint, Mode, Options, TestCase, role_agent_id
from farm.conversation.awaiting import detect_awaiting, last_sentence
from farm.conversation.blame import UNKNOWN_REASON, deterministic_blame
from farm.conversation.checkpoints import CheckpointTracker
from farm.conversation.digest import inputs_digest
from farm.conversation.session import Session
from farm.conversation.settings import MAX_TOOL_STEPS, RunSettings
from farm.conversation.simflags import ending_flags, input_flags
from farm.durations import format_duration
from farm.errors import EndpointUnreachable, FarmError
from farm.jsontext import as_text
from farm.loaded import LoadedCase
from farm.messages import user_messages
from farm.results import (
    NO_REPLY,
    AssertionResult,
    Blame,
    CaseResult,
    EndedBy,
    ErrorRole,
    InputSource,
    Status,
    StepReply,
    TurnResult,
    add_cost,
)
from farm.roles.cache import tally
from farm.roles.types import VALIDATOR_ERROR, HumanRequest, RoleError, RoleRequest, SimulatorTurn

if TYPE_CHECKING:
    from farm.results import SpanRecord
    from farm.traces.capture import CaseTrace, ReceivedSpans, TurnSpans

__all__ = ["RunSettings", "Services", "error_result", "no_spans", "run_case"]

AWAITING_HINT = "Add more turns, use --interactive, or configure a simulator"


class Services(Protocol):
    """What the runner needs beyond the agent under test."""

    @property
    def assertion_env(self) -> AssertionEnv | None: ...

    async def simulate(self, request: RoleRequest) -> SimulatorTurn: ...

    async def ask_human(self, request: HumanRequest) -> str | None: ...

    async def mock_tool(self, mock: Any, arguments: Any) -> Any: ...

    async def run_hook(self, reference: str, payload: dict[str, Any]) -> Any: ...

    async def run_script_test(self, loaded: LoadedCase, result: CaseResult) -> None: ...

    async def attribute(self, request: RoleRequest) -> tuple[Blame, str]: ...

    @property
    def received_spans(self) -> ReceivedSpans | None:
        """Where a remote agent's spans arrive when not in this process (the ray engine's desk)."""
        ...


class _Stop(Exception):
    """Ends a conversation with a status (raised inside the mode loops)."""

    def __init__(self, status: Status, error: str | None = None, ended_by: EndedBy | None = None, error_role: ErrorRole | None = None):
        super().__init__(error)
        self.status = status
        self.error = error
        self.ended_by = ended_by
        """The side that ended it (:attr:`CaseResult.ended_by`); None for the case's own verdicts."""
        self.error_role = error_role
        """The role whose failure this is (:attr:`CaseResult.error_role`)."""

    @classmethod
    def of_error(cls, where: str, outcome: AssertionResult) -> _Stop:
        """The error of an assertion that could not be evaluated; a judge's failure names its role."""
        role: ErrorRole | None = "validator" if (outcome.message or "").startswith(VALIDATOR_ERROR) else None
        return cls(Status.ERROR, f"{where}: {outcome.message}", error_role=role)


@functools.lru_cache(maxsize=64)
def _folder(base_dir: str) -> Path:
    """A suite's folder as a path, made once: the cases of a suite share it, and a ``Path`` costs ~2 µs."""
    return Path(base_dir)


class _Conversation:
    def __init__(self, loaded: LoadedCase, target: AgentClient, services: Services | None, settings: RunSettings):
        assert loaded.case is not None
        self.case: TestCase = loaded.case
        self.loaded = loaded
        self.target = target
        self.services = services
        self.settings = settings
        self.session = Session(variables=dict(self.case.variables))
        self.result = CaseResult(
            id=self.case.id,
            name=self.case.name,
            status=Status.PASSED,
            mode="script" if loaded.script else self.case.resolved_mode.value,
            agent=settings.agent_id,
            tags=self.case.tags,
            source=loaded.source,
            run_id=settings.run_id,
            worker=settings.worker,
            inputs_digest=None if loaded.script else inputs_digest(self.case, settings),
        )
        self.base_dir = _folder(loaded.base_dir) if loaded.base_dir else None
        self.mocks = {**settings.agent_tool_mocks, **self.case.tool_mocks}
        self.timeouts: list[asyncio.Timeout] = []
        """The case's timeout, paused with the turn's while a request waits for a permit."""
        self.answering: TurnResult | None = None
        """The turn whose agent call is under way: the one the case's timeout cuts, if it runs out then."""
        self.replayed = getattr(target, "replays", False)
        """A replay's spans come with its replies: none is captured."""
        self.in_process = getattr(target, "in_process", False)
        """An in-process agent's spans have all ended when it answers: none comes late."""
        self.traced = loaded.traced or settings.traces or (settings.exported and self.in_process)
        """Whether the case run's spans are captured (or, replayed, kept from the recording)."""
        self.trace: CaseTrace | None = None
        self.turn_spans: TurnSpans | None = None

    # -- the case run's trace ------------------------------------------------

    @contextmanager
    def traced_turn(self, turn: TurnResult) -> Iterator[None]:
        """The agent called inside the turn's span (a live run that captures traces): the spans it
        made are the turn's (:meth:`settle_spans` waits for a remote agent's late ones)."""
        if self.replayed or not (self.traced or self.settings.exported):
            yield
            return
        if not self.traced:  # exported, not captured: the ids alone, for the agent and the export
            with self.exported_turn(turn):
                yield
            return
        if self.trace is None:
            from farm.traces.capture import CaseTrace

            received = self.services.received_spans if self.services is not None and not self.in_process else None
            self.trace = CaseTrace(self.case.id, self.settings.agent_id, self.session.id, self.settings.max_spans, received)
        self.result.trace_id = f"{self.trace.trace_id:032x}"
        with self.trace.turn() as spans:
            self.turn_spans = spans
            turn.span_id = spans.span_id
            turn.spans = spans.spans  # one list: what arrives later is the turn's too
            yield

    @contextmanager
    def exported_turn(self, turn: TurnResult) -> Iterator[None]:
        """A turn of a case run sent out as a trace (``--otlp``) whose agent's spans are not captured:
        the turn's span id, named in a remote agent's ``traceparent`` so that its own spans join
        the trace in the backend they go to."""
        from farm.traces.parent import new_span_id, new_trace_id, parent_of_requests

        self.result.trace_id = self.result.trace_id or new_trace_id()
        turn.span_id = new_span_id()
        with parent_of_requests(self.result.trace_id, turn.span_id):
            yield

    async def settle_spans(self) -> None:
        """After a remote agent's turn: wait (up to ``trace_wait``) for its spans, which its
        exporter sends to the farm's receiver in batches."""
        if self.trace is not None and self.turn_spans is not None and not self.in_process:
            await self.trace.settle(self.turn_spans, self.settings.trace_wait)

    def all_spans(self) -> list[SpanRecord] | None:
        """The case run's spans so far (what final assertions and checkpoints see); None untraced."""
        return [span for turn in self.result.turns for span in turn.spans] if self.traced else None

    def close_trace(self) -> None:
        """End the case run's trace; a case that asserts on traces and saw no span at all is an error."""
        if self.trace is not None:
            self.trace.close()
            self.result.spans_dropped = self.trace.dropped
        result = self.result
        if self.loaded.traced and result.status in (Status.PASSED, Status.FAILED) and result.turns and not any(t.spans for t in result.turns):
            result.status, result.error = Status.ERROR, no_spans(None if self.in_process else self.settings.trace_receiver)
            _unjudged_without_spans(result, result.error)

    # -- one exchange --------------------------------------------------------

    async def exchange(self, user_input: Any, source: InputSource, options: Options, attachments: list[Any], timeout: float | None) -> TurnResult:
        """Send one user input and read the reply, answering mocked tool calls in between."""
        self.session.turn_count += 1
        # no_reply until a reply says otherwise: a turn cut before it (an error, a timeout) never reads "completed"
        turn = TurnResult(
            turn=self.session.turn_count, input=user_input, input_source=source, started_at=time.time(), awaiting_reason=NO_REPLY
        )
        self.result.turns.append(turn)
        self.result.total_turns = len(self.result.turns)
        try:
            self.session.add_user(user_messages(user_input, attachments, self.base_dir))
        except ValueError as exc:
            turn.error = str(exc)
            raise _Stop(Status.ERROR, f"turn {turn.turn}: {exc}") from None
        clock = self.settings.clock
        started = clock()
        wait = None
        self.answering = turn
        try:
            # the turn's timeout measures the agent: it (and the case's) pauses while a request
            # waits for a rate-limit permit; asyncio.timeout makes no task of its own, unlike wait_for
            async with asyncio.timeout(timeout or self.settings.turn_timeout) as turn_timeout:
                with waiting_for_permits([turn_timeout, *self.timeouts]) as wait, self.traced_turn(turn):
                    await self._steps(turn, options)
        except TimeoutError:
            limit = format_duration(timeout or self.settings.turn_timeout)
            turn.error = f"the agent did not answer within the turn timeout ({limit})"
            raise _Stop(Status.TIMEOUT, f"turn {turn.turn}: {turn.error}", ended_by="agent") from None
        except AgentTimeoutError as exc:
            turn.error = f"agent error: {exc}"
            raise _Stop(Status.TIMEOUT, f"turn {turn.turn}: {turn.error}", ended_by="agent") from None
        except EndpointUnreachable as exc:  # the run stops on it: the error is the sentence the run ends with
            turn.error = f"agent error: {exc}"
            raise _Stop(Status.ERROR, str(exc), ended_by="unreachable") from None
        except AgentError as exc:
            turn.error, turn.traceback = f"agent error: {exc}", exc.traceback
            raise _Stop(Status.ERROR, f"turn {turn.turn}: {turn.error}", ended_by="agent") from None
        finally:
            queued = wait.seconds if wait is not None else 0.0
            turn.queued_ms = round(queued * 1000, 3)
            turn.duration_ms = round(max(0.0, clock() - started - queued) * 1000, 3)
            for step in turn.replies:  # the usual case, content that is the turn's output, is not written twice
                if step.content == turn.output:
                    step.content = None
            self.result.usage = self.result.usage + turn.usage
            self.result.cost_usd = add_cost(self.result.cost_usd, turn.cost_usd)
        self.answering = None
        await self.settle_spans()  # not the turn's time: the agent has answered
        return turn

    async def _steps(self, turn: TurnResult, options: Options) -> None:
        opts = options.model_dump(exclude_none=True)
        opts["session_id"] = self.session.id
        limit = self.case.max_tool_steps or self.settings.max_tool_steps or MAX_TOOL_STEPS
        for step in range(1, limit + 1):
            try:
                reply = await self.target.send(list(self.session.messages), opts)
            except AgentError as exc:
                turn.retries += exc.retries  # the requests a failed call sent count too
                raise
            turn.steps = step
            turn.retries += reply.retries
            if reply.spans:
                turn.spans.extend(reply.spans)
            turn.truncated = turn.truncated or reply.finish_reason == "length"
            turn.usage = turn.usage + reply.usage
            turn.cost_usd = add_cost(turn.cost_usd, reply.cost_usd)
            awaiting, reason = detect_awaiting(reply, self.settings.input_tools)
            mocked = [self.mocks.get(call.name) for call in reply.tool_calls]
            results = [
                None if mock is None else await self._mock_result(mock, call.arguments)
                for mock, call in zip(mocked, reply.tool_calls, strict=True)
            ]
            records = self.session.add_reply(reply, results)
            for record in records:
                record.step = step
            turn.tool_calls.extend(records)
            turn.replies.append(
                StepReply(content=reply.content, awaiting_input=reply.awaiting_input, input_hint=reply.input_hint, usage=reply.usage, retries=reply.retries)
            )
            turn.output = reply.content if reply.content or not turn.output else turn.output
            turn.awaiting_input, turn.awaiting_reason = awaiting, reason
            turn.input_hint = reply.input_hint
            keep_going = reply.tool_calls and any(m is not None for m in mocked) and not awaiting
            if not keep_going:
                return
        turn.note = f"stopped after {limit} tool steps (max_tool_steps): the agent was still calling mocked tools"

    async def _mock_result(self, mock: Any, arguments: Any) -> Any:
        if isinstance(mock, str) and mock.startswith("scripts:"):
            if self.services is None:
                raise AgentError(f"tool mock '{mock}' needs scripts, which this run does not offer")
            try:
                return await self.services.mock_tool(mock, arguments)
            except FarmError as exc:  # a reference that escapes scripts_dir, a missing module: the user's to fix
                raise _Stop(Status.ERROR, f"turn {self.session.turn_count}: tool mock {mock}: {exc}", ended_by="tool_mock") from None
            except Exception as exc:  # the user's mock function raised
                message = f"turn {self.session.turn_count}: tool mock {mock} failed: {type(exc).__name__}: {exc}"
                raise _Stop(Status.ERROR, message, ended_by="tool_mock") from None
        return mock

    # -- assertions ----------------------------------------------------------

    def subject(self, turn: TurnResult, include_tool_texts: bool = False) -> Subject:
        return Subject(
            content=turn.output,
            tool_calls=turn.tool_calls,
            latency_ms=turn.duration_ms,
            input=turn.input,
            tool_texts=[as_text(c.result) for c in turn.tool_calls] if include_tool_texts else [],
            conversation=list(self.session.messages),
            metadata=self._metadata(),
            time_limit=self.settings.turn_timeout,
            spans=turn.spans if self.traced else None,
        )

    def _metadata(self) -> dict[str, Any]:
        meta = {"test_id": self.case.id, **self.case.options.metadata}
        if self.case.user:
            meta["user"] = self.case.user
        if self.case.team:
            meta["team"] = self.case.team
        return meta

    async def check(self, specs: list[AssertionSpec], subject: Subject) -> list[AssertionResult]:
        env = self.services.assertion_env if self.services else None
        return [await evaluate(spec, subject, env) for spec in specs]

    @staticmethod
    def verdict(results: list[AssertionResult], where: str) -> None:
        for r in results:
            if r.error:
                raise _Stop.of_error(where, r)
        failed = [r for r in results if not r.passed]
        if failed:
            raise _Stop(Status.FAILED, f"{where}: {failed[0].message}")

    # -- modes ---------------------------------------------------------------

    def base_options(self, extra: Options | None = None) -> Options:
        options = self.case.options
        if self.case.user or self.case.team:  # otherwise the case's own, as they are: nothing changes them
            metadata = dict(options.metadata)
            if self.case.user:
                metadata.setdefault("user", self.case.user)
            if self.case.team:
                metadata.setdefault("team", self.case.team)
            options = options.model_copy(update={"metadata": metadata})
        return options.merged(extra)

    async def run_single(self) -> None:
        case = self.case
        turn = await self.exchange(case.input, "static", self.base_options(), case.attachments, None)
        specs = list(case.assertions)
        if case.expected is not None:
            specs.append(AssertionSpec(type="equals", value=case.expected))
        turn.assertions = await self.check(specs, self.subject(turn))
        self.verdict(turn.assertions, f"turn {turn.turn}")
        await self.final_assertions()

    async def run_static(self) -> None:
        case = self.case
        turns = case.turns or []
        last: TurnResult | None = None
        source: InputSource
        for index, spec in enumerate(turns):
            user_input, source = spec.input, "static"
            if self.settings.interactive and index > 0 and last is not None and last.awaiting_input:
                answer = await self.ask_human(last, proposed=spec.input)
                if answer is not None and answer != spec.input:
                    user_input, source = answer, "human"
            attachments = [*(case.attachments if index == 0 else []), *spec.attachments]
            last = await self.exchange(user_input, source, self.base_options(spec.options), attachments, spec.timeout)
            specs = list(spec.assertions)
            if index == len(turns) - 1 and case.expected is not None:
                specs.append(AssertionSpec(type="equals", value=case.expected))
            last.assertions = await self.check(specs, self.subject(last))
            self.verdict(last.assertions, f"turn {last.turn}")
        assert last is not None
        last = await self.continue_while_awaiting(last)
        await self.final_assertions()

    async def continue_while_awaiting(self, last: TurnResult) -> TurnResult:
        """After the last defined turn: the simulator, a person, or skip/fail."""
        case = self.case
        simulator = self.simulator_id() if case.simulator is not None else None
        while last.awaiting_input:
            if len(self.result.turns) >= case.max_turns:
                if simulator:
                    raise _Stop(Status.FAILED, f"max turns ({case.max_turns}) reached while the agent still awaited input")
                break
            if simulator:
                sim = await self.simulate(simulator)
                if sim.goal_achieved and sim.input in (None, ""):
                    self.result.goal_achieved_at = len(self.result.turns) + 1
                    break
                flags = input_flags(sim.input, self.result.turns, [])
                last = await self.exchange(sim.input, "simulated", self.base_options(), [], None)
                last.simulator_reasoning, last.sim_flags = sim.reasoning, flags
                continue
            if self.settings.interactive:
                answer = await self.ask_human(last, proposed=None)
                if answer is not None:
                    last = await self.exchange(answer, "human", self.base_options(), [], None)
                    continue
            break
        if last.awaiting_input and not simulator:
            question = last_sentence(last.output) or last.output
            self.result.awaiting_question = question or None
            self.result.hint = last.input_hint and f"the agent expects: {last.input_hint}. {AWAITING_HINT}" or AWAITING_HINT
            reason = "agent awaiting input, no next turn defined"
            status = Status.FAILED if self.settings.on_missing_input == "fail" else Status.SKIPPED
            raise _Stop(status, reason)
        return last

    async def run_dynamic(self) -> None:
        case = self.case
        simulator = self.simulator_id()
        checkpoints = CheckpointTracker(case.checkpoints or [])
        self.result.checkpoints = checkpoints.results
        first = True
        source: InputSource
        while True:
            if first and case.input is not None:
                user_input, source, reasoning = case.input, "static", None
            else:
                if len(self.result.turns) >= case.max_turns:
                    raise _Stop(Status.FAILED, f"max turns ({case.max_turns}) reached; missing checkpoints: {', '.join(checkpoints.missing)}")
                sim = await self.simulate(simulator)
                if sim.goal_achieved:
                    self.result.goal_achieved_at = len(self.result.turns) + 1
                    if self.result.turns:  # the simulator's ending judged on the turn it ended after
                        self.result.turns[-1].sim_flags += ending_flags(checkpoints.missing)
                    raise _Stop(Status.FAILED, f"the simulator says the goal is achieved, but checkpoints are missing: {', '.join(checkpoints.missing)}")
                user_input, source, reasoning = sim.input, "simulated", sim.reasoning
            if source == "simulated" and self.settings.interactive and self.result.turns and self.result.turns[-1].awaiting_input:
                answer = await self.ask_human(self.result.turns[-1], proposed=user_input)
                if answer is not None and answer != user_input:
                    user_input, source = answer, "human"
            first = False
            flags = input_flags(user_input, self.result.turns, case.checkpoints or []) if source == "simulated" else []
            turn = await self.exchange(user_input, source, self.base_options(), case.attachments if len(self.result.turns) == 0 else [], None)
            turn.simulator_reasoning, turn.sim_flags = reasoning, flags
            subject = self.subject(turn, include_tool_texts=True)
            subject.spans, subject.trace_scope = self.all_spans(), "the case run"  # a checkpoint may be reached by earlier turns' calls
            outcomes = await checkpoints.check(turn.turn, functools.partial(self.check_point, subject))
            for cp_id, outcome in outcomes.items():
                if outcome.error:
                    raise _Stop.of_error(f"checkpoint '{cp_id}'", outcome)
            if checkpoints.complete:
                await self.final_assertions()
                return
            if not turn.awaiting_input and turn.awaiting_reason == "completed":
                raise _Stop(Status.FAILED, f"the agent completed with checkpoints missing: {', '.join(checkpoints.missing)}")

    async def check_point(self, subject: Subject, checkpoint: Checkpoint) -> AssertionResult:
        return await evaluate(checkpoint.assertion, subject, self.services.assertion_env if self.services else None)

    def simulator_id(self) -> str:
        sim = self.case.simulator
        agent_id = role_agent_id(sim.use if sim else None, self.settings.default_simulator)
        if not agent_id:
            raise _Stop(Status.ERROR, "no simulator: give 'simulator.use' in the case, --simulator, or [farm].simulator")
        return agent_id

    async def simulate(self, agent_id: str) -> SimulatorTurn:
        if self.services is None:
            raise _Stop(Status.ERROR, "this run has no simulator service")
        spec = self.case.simulator
        turn = len(self.result.turns) + 1
        metadata = {
            **(spec.options.metadata if spec else {}),
            "test_mode": "simulator",
            "test_id": self.case.id,
            "session_id": self.session.id,
            "turn_number": turn,
            "turn_count": len(self.result.turns),
            "max_turns": self.case.max_turns,
            "last_response": self.result.turns[-1].output if self.result.turns else "",
            "tool_results": [r.model_dump() for r in self.session.tool_results],
        }
        request = RoleRequest(agent_id, list(self.session.messages), metadata, connector=spec.options.connector if spec else None, turn=turn)
        try:
            sim = await self.services.simulate(request)
        except RoleError as exc:
            raise _Stop(Status.ERROR, f"simulator error: {exc}", ended_by="simulator", error_role="simulator") from None
        if not sim.goal_achieved and sim.input in (None, ""):
            raise _Stop(Status.ERROR, "simulator error: it answered no input", ended_by="simulator", error_role="simulator")
        return sim

    async def ask_human(self, last: TurnResult, proposed: Any) -> str | None:
        if self.services is None:
            return None
        timeout = self.case.interactive.timeout if self.case.interactive else 300.0
        request = HumanRequest(
            case_id=self.case.id,
            turn=last.turn + 1,
            question=last.output,
            hint=last.input_hint,
            proposed=proposed,
            timeout=timeout,
        )
        return await self.services.ask_human(request)

    async def final_assertions(self) -> None:
        if not self.case.final_assertions:
            return
        last = self.result.turns[-1] if self.result.turns else None
        subject = Subject(
            content=last.output if last else "",
            tool_calls=list(self.session.tool_results),
            latency_ms=self.result.duration_ms,
            document=self.session.state_document(),
            conversation=list(self.session.messages),
            metadata=self._metadata(),
            spans=self.all_spans(),
            trace_scope="the case run",
        )
        self.result.final_assertions = await self.check(self.case.final_assertions, subject)
        self.verdict(self.result.final_assertions, "final assertions")

    async def blame(self) -> None:
        """Whose failure a failed dynamic case is (:mod:`farm.conversation.blame`); a simulator-blamed
        one becomes an error of the simulator when the run says so (``[farm].simulator_failures``)."""
        result = self.result
        if result.status != Status.FAILED or result.mode != Mode.DYNAMIC.value:
            return
        settled = deterministic_blame(result)
        if settled is None and self.settings.attribute and self.settings.attributor and self.services is not None:
            settled = await self.attribute(self.settings.attributor)
        result.blame, result.blame_reason = settled or ("unknown", UNKNOWN_REASON)
        if result.blame == "simulator" and self.settings.simulator_failures == "error":
            result.status, result.error_role = Status.ERROR, "simulator"
            result.error = f"simulator error: {result.blame_reason} (the case failed: {result.error})"

    async def attribute(self, agent_id: str) -> tuple[Blame, str]:
        """The attributor's blame of this failed case; its failure is said as the reason, and blames no one."""
        assert self.services is not None
        spec, result = self.case.simulator, self.result
        reached = {c.id: c.reached_at_turn for c in result.checkpoints}
        checkpoints = [
            f"{cp.id} ({'required' if cp.required else 'optional'}; "
            + (f"reached at turn {reached[cp.id]}" if reached.get(cp.id) else "NOT reached")
            + f"): {describe(cp.assertion.type, cp.assertion.expected)}" + (f" — {cp.description}" if cp.description else "")
            for cp in self.case.checkpoints or []
        ]
        metadata = {
            **(spec.options.metadata if spec else {}),
            "test_id": self.case.id,
            "checkpoints": "\n".join(checkpoints),
            "outcome": result.error or "failed",
            "sim_flags": "; ".join(f"turn {t.turn}: {', '.join(t.sim_flags)}" for t in result.turns if t.sim_flags) or "none",
        }
        try:
            blame, reason = await self.services.attribute(RoleRequest(agent_id, list(self.session.messages), metadata))
        except RoleError as exc:
            return "unknown", f"the attributor failed: {exc}"
        return blame, f"{reason} (the attributor)"

    async def run(self) -> None:
        mode = self.case.resolved_mode
        if mode == Mode.SINGLE:
            await self.run_single()
        elif mode == Mode.STATIC:
            await self.run_static()
        else:
            await self.run_dynamic()
        await self.compare_golden()

    async def compare_golden(self) -> None:
        """Compare the finished conversation with its golden one (farm.conversation.golden), when the run asks."""
        if self.loaded.golden is None:
            return
        from farm.conversation.golden import compare

        env = self.services.assertion_env if self.services else None
        for where, outcome in await compare(self.loaded.golden, self.result, env):
            self.verdict([outcome], where)


def _unjudged_without_spans(result: CaseResult, why: str) -> None:
    """Mark the trace assertions of a case run whose agent emitted no span as errors, not
    verdicts: with no span they could not look at anything, so "found 0 calls" (or, negated, a
    pass) would blame or clear the agent where the farm saw nothing (the case is an error)."""
    records = [*(a for turn in result.turns for a in turn.assertions), *result.final_assertions]
    records += [c.assertion for c in result.checkpoints if c.assertion is not None]
    for record in records:
        if record.type in TRACE_TYPES:
            record.passed, record.error, record.message = False, True, why


def no_spans(receiver: str | None) -> str:
    """Why a case run that asserts on traces but saw no span is an error; ``receiver``: the OTLP
    receiver a remote agent was to export to."""
    where = f" (none reached the farm's receiver at {receiver})" if receiver else ""
    return f"the agent emitted no OpenTelemetry spans: is it instrumented?{where} (docs/traces.md)"


def error_result(loaded: LoadedCase, settings: RunSettings, message: str, status: Status = Status.ERROR) -> CaseResult:
    """A result for a case that could not run (load error, hook failure, lost worker)."""
    case = loaded.materialized().case
    mode = None
    if case is not None:
        try:
            mode = case.resolved_mode.value
        except ValueError:
            mode = None
    return CaseResult(
        id=loaded.id,
        name=case.name if case else (loaded.raw.get("name") if isinstance(loaded.raw, dict) else None),
        status=status,
        mode=mode,
        agent=settings.agent_id,
        tags=case.tags if case else [],
        source=loaded.source,
        error=message,
        run_id=settings.run_id,
        worker=settings.worker,
    )


async def run_case(loaded: LoadedCase, target: AgentClient, services: Services | None, settings: RunSettings) -> CaseResult:
    """Run one case to its end and return its result. Never raises for the case's own problems."""
    loaded = loaded.materialized()
    if not loaded.ok:
        return error_result(loaded, settings, loaded.error or "the case did not load")
    assert loaded.case is not None
    reason = loaded.case.skip_reason()
    if reason:
        return error_result(loaded, settings, reason, Status.SKIPPED)
    conversation = _Conversation(loaded, target, services, settings)
    result = conversation.result
    result.started_at = time.time()
    started = time.perf_counter()
    timeout = loaded.case.timeout or settings.case_timeout
    with tally() as calls:  # the role calls made for this case, wherever they run
        try:
            async with asyncio.timeout(timeout) as case_timeout:
                conversation.timeouts.append(case_timeout)
                await _run_with_hooks(conversation)
        except _Stop as stop:
            result.status, result.error, result.ended_by, result.error_role = stop.status, stop.error, stop.ended_by, stop.error_role
        except TimeoutError:
            result.status = Status.TIMEOUT
            result.error = f"the case did not finish within its timeout ({format_duration(timeout)})"
            result.ended_by = "case_timeout"
            cut = conversation.answering
            if cut is not None and cut.error is None:  # the agent was answering: the turn never got its reply
                cut.error = f"the agent did not answer before the case's timeout ({format_duration(timeout)}) ran out"
        finally:
            result.duration_ms = round((time.perf_counter() - started) * 1000, 3)
            result.total_turns = len(result.turns)
            conversation.close_trace()
        await conversation.blame()
        await _after_hook(conversation)
    result.role_calls, result.cache_hits, result.role_log = calls.role_calls, calls.cache_hits, calls.log
    result.role_cost_usd = calls.cost_usd
    return result


async def _run_with_hooks(conversation: _Conversation) -> None:
    """The ``before`` hook (a failure makes the case an error), then the conversation or script test."""
    case, services = conversation.case, conversation.services
    if case.before:
        if services is None:
            raise _Stop(Status.ERROR, f"before hook {case.before}: this run offers no scripts")
        try:
            extra = await services.run_hook(case.before, {"phase": "before", "case": case.model_dump(mode="json")})
        except Exception as exc:
            raise _Stop(Status.ERROR, f"before hook {case.before} failed: {type(exc).__name__}: {exc}") from None
        if isinstance(extra, dict):
            conversation.session.variables.update(extra)
    if conversation.loaded.script:
        if services is None:
            raise _Stop(Status.ERROR, "script tests need the farm's services")
        await services.run_script_test(conversation.loaded, conversation.result)
        return
    await conversation.run()


async def _after_hook(conversation: _Conversation) -> None:
    """The ``after`` hook gets the result; its failure turns a passing case into an error."""
    case, services, result = conversation.case, conversation.services, conversation.result
    if not case.after or services is None:
        return
    try:
        await services.run_hook(case.after, {"phase": "after", "case": case.model_dump(mode="json"), "result": result.model_dump(mode="json")})
    except Exception as exc:
        message = f"after hook {case.after} failed: {type(exc).__name__}: {exc}"
        if result.status == Status.PASSED:
            result.status, result.error = Status.ERROR, message
        else:
            result.error = f"{result.error}; {message}"
