"""Replaying recorded conversations: what ``farm rescore`` runs instead of the agent.

A rescore re-evaluates a suite's assertions (the run's own, or an edited copy)
against the conversations a run recorded. It goes through the runner itself
(:func:`farm.conversation.runner.run_case`), so the modes, checkpoints with ``after``, the
termination rules, ``final_assertions`` and the awaiting-input rules are those
of a live run. Only three things are swapped:

- the agent under test is a :class:`ReplayClient`, which answers each call
  with the recorded reply of that turn and step (content, tool calls, declared
  ``awaiting_input``, input hint, usage, retries, a cut at the token limit, the
  spans the agent made, so trace assertions judge them) and moves a :class:`ReplayClock`
  by the turn's recorded ``duration_ms``, so ``latency`` assertions judge the
  recorded times;
- the simulator answers the recorded simulated inputs in order, and the
  goal achieved where the run's simulator said so (``goal_achieved_at``);
- tool mocks given as ``scripts:`` answer the recorded tool results (literal
  mocks are part of the inputs digest, so they are the same).

Everything else goes to the run's real services: ``agent`` (validator) and
``script`` assertions are evaluated for real, through the same role callers
as ``farm test`` (and their cache). Case ``before``/``after`` hooks do not run:
they prepare and clean up the agent's world, and no agent is called.

A case is *not rescorable* (status ``error``, ``rescorable: false``, an
``error`` saying why and "rerun it") when its inputs changed since the run
(:mod:`farm.conversation.digest`), when it is not in the run, when a recorded reply was cut
at ``OUTPUT_LIMIT`` in the results, or when the edited case needs more of the
conversation than was recorded (e.g. an added checkpoint makes a dynamic case
go on past its last recorded turn). When the recording ended in an agent
error, a timeout, a failed tool mock or a simulator error and the replay
reaches that same end, the case ends with the recorded status and error (a
simulator error recorded as ``skipped`` by an older farm is the ``error`` it is now).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from farm.agents.base import Message, Reply, ToolCall
from farm.assertions import AssertionEnv
from farm.conversation.digest import changed_inputs, inputs_digest
from farm.conversation.runner import RunSettings, Services, error_result, run_case
from farm.errors import RecordingEnds, RoleError
from farm.loaded import LoadedCase
from farm.results import Blame, CaseResult, CaseRunKey, Status, TurnResult
from farm.results._suites import same_suite, suite_of
from farm.roles.types import HumanRequest, RoleRequest, SimulatorTurn
from farm.wording import shown

__all__ = ["NOT_RESCORABLE", "RecordingEnds", "Replay", "ReplayClient", "ReplayClock", "ReplayServices", "not_rescorable"]

NOT_RESCORABLE = "not rescorable"
"""How a not-rescorable case's ``error`` starts."""


class ReplayClock:
    """A clock that stands still except when a replayed turn moves it by its recorded time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` (a replayed turn's recorded agent time)."""
        self.now += seconds


def _script_mock(mock: Any) -> bool:
    return isinstance(mock, str) and mock.startswith("scripts:")


class ReplayClient:
    """The agent under test, played back from one recorded :class:`CaseResult`.

    Each :meth:`send` answers the next recorded step: the steps of turn 1, then of
    turn 2, and so on (the runner asks for them in that order, since the inputs
    that decide the steps are unchanged). A turn's first call moves ``clock`` by
    the turn's recorded agent time. Past the recording, or where the recorded turn
    ended in an error, :meth:`send` raises :class:`RecordingEnds`.
    """

    replays = True
    """Its turns' spans come with its replies (:mod:`farm.traces.capture` captures none)."""

    def __init__(self, recorded: CaseResult, clock: ReplayClock, mocks: dict[str, Any]):
        self.turns = recorded.turns
        self.clock = clock
        self.mocks = mocks
        self.turn = 0
        """Index of the recorded turn being replayed."""
        self.step = 0
        """Steps of that turn already replayed."""
        self.ended = False
        """Whether the replay asked past the recording."""
        self.script_results: list[Any] = []
        """Recorded results of this step's ``scripts:`` mocked calls, in call order."""
        self._timed = -1

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply:
        """The next recorded step's reply (see :class:`~farm.agents.base.AgentClient`); raises
        :class:`RecordingEnds` past the recording."""
        while self.turn < len(self.turns):
            turn = self.turns[self.turn]
            if self._timed != self.turn:
                self._timed = self.turn
                self.clock.advance(turn.duration_ms / 1000)
            if self.step < len(turn.replies):
                self.step += 1
                return self._reply(turn, self.step)
            if turn.error or self.turn == len(self.turns) - 1:
                break  # this turn ended in an error, or the conversation ended here
            self.turn, self.step = self.turn + 1, 0
        self.ended = True
        raise RecordingEnds(f"the run recorded no reply for turn {self.turn + 1}, step {self.step + 1}")

    def _reply(self, turn: TurnResult, step: int) -> Reply:
        recorded = turn.replies[step - 1]
        calls = [c for c in turn.tool_calls if c.step == step]
        self.script_results = [c.result for c in calls if _script_mock(self.mocks.get(c.name))]
        return Reply(
            content=turn.output if recorded.content is None else recorded.content,
            tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.args) for c in calls],
            awaiting_input=recorded.awaiting_input,
            input_hint=recorded.input_hint,
            usage=recorded.usage,
            retries=recorded.retries,
            finish_reason="length" if turn.truncated and step == len(turn.replies) else None,
            spans=list(turn.spans) if step == 1 else None,  # the turn's spans, once
        )

    async def aclose(self) -> None:
        """Nothing to close: no connection was opened (see :class:`~farm.agents.base.AgentClient`)."""


class ReplayServices:
    """The runner's :class:`~farm.conversation.runner.Services` for a replay: the simulator, a person and
    ``scripts:`` tool mocks answer from the recording; assertions use ``base``'s real services."""

    def __init__(self, base: Services, recorded: CaseResult, client: ReplayClient):
        self.base = base
        self.recorded = recorded
        self.client = client
        self.ended = False
        """Whether the simulator or a tool mock was asked past the recording."""

    @property
    def assertion_env(self) -> AssertionEnv | None:
        """The real services' assertion environment (see :class:`~farm.conversation.runner.Services`)."""
        return self.base.assertion_env

    async def simulate(self, request: RoleRequest) -> SimulatorTurn:
        """The recorded simulated (or human) input of the turn asked for, or the recorded end
        of the goal (see :class:`~farm.conversation.runner.Services`); a :class:`RoleError` past the recording."""
        number = request.turn or 0
        turns = self.recorded.turns
        if 0 < number <= len(turns) and turns[number - 1].input_source in ("simulated", "human"):
            turn = turns[number - 1]
            return SimulatorTurn(input=turn.input, reasoning=turn.simulator_reasoning)
        if number == self.recorded.goal_achieved_at:
            return SimulatorTurn(input=None, goal_achieved=True)
        self.ended = True
        raise RoleError(f"the run recorded no simulated input for turn {number}")

    @property
    def received_spans(self) -> None:
        """None: a replay calls no agent, so no span is received (the recorded ones are replayed)."""
        return None

    async def attribute(self, request: RoleRequest) -> tuple[Blame, str]:
        """The attributor, asked for real (through the role cache): it judges, as a validator does."""
        return await self.base.attribute(request)

    async def ask_human(self, request: HumanRequest) -> str | None:
        """The person's recorded answer for that turn, else None (see :class:`~farm.conversation.runner.Services`)."""
        turns = self.recorded.turns
        if 0 < request.turn <= len(turns) and turns[request.turn - 1].input_source == "human":
            value = turns[request.turn - 1].input
            return value if isinstance(value, str) else None
        return None

    async def mock_tool(self, mock: Any, arguments: Any) -> Any:
        """The next recorded result of a ``scripts:`` tool mock in this step (see
        :class:`~farm.conversation.runner.Services`); :class:`RecordingEnds` when none is left."""
        if not self.client.script_results:
            self.ended = True
            raise RecordingEnds("the run recorded no result for this tool call")
        return self.client.script_results.pop(0)

    async def run_hook(self, reference: str, payload: dict[str, Any]) -> Any:
        """Runs nothing (see :class:`~farm.conversation.runner.Services`)."""
        return None  # hooks prepare the agent's world; a replay calls no agent

    async def run_script_test(self, loaded: LoadedCase, result: CaseResult) -> None:  # pragma: no cover - refused before
        """Refused: a script test is code, not a recording (see :class:`~farm.conversation.runner.Services`)."""
        raise RecordingEnds("script tests are not replayed")


def not_rescorable(loaded: LoadedCase, settings: RunSettings, reason: str) -> CaseResult:
    """The result of a case the run's recording cannot answer: an error that says why."""
    result = error_result(loaded, settings, f"{NOT_RESCORABLE}: {reason}; rerun it")
    result.rescorable = False
    return result


@dataclasses.dataclass
class Replay:
    """Rescores cases against a run's recorded results (set as ``RunPlan.replay``)."""

    recorded: dict[CaseRunKey, CaseResult]
    """The source run's results by :class:`~farm.results.CaseRunKey` (:meth:`CaseResult.run_key`)."""
    source: str
    """The source run's id."""
    _suites: dict[str, set[str]] = dataclasses.field(default_factory=dict, init=False, repr=False)
    """The suites of each case id the source run has."""

    def __post_init__(self) -> None:
        for suite, case_id, _, _ in self.recorded:
            self._suites.setdefault(case_id, set()).add(suite)

    def lookup(self, loaded: LoadedCase, run_index: int, agent: str) -> CaseResult | str:
        """The recorded result of ``loaded``'s run ``run_index`` on ``agent``, else why there is none.

        A case is the recorded case of its suite and id; a case read from another file (an edited
        copy of the suite, a generated run's ``generated.jsonl``) is the recorded case of its id,
        when the source run has that id in one suite only."""
        suite = suite_of(loaded.source)
        found = self.recorded.get(CaseRunKey(suite, loaded.id, run_index, agent))
        suites = self._suites.get(loaded.id, set())
        same = [each for each in suites if same_suite(each, suite)]
        if found is None and len(same) == 1:  # its file read from another folder
            found = self.recorded.get(CaseRunKey(same[0], loaded.id, run_index, agent))
        if found is None and len(suites) == 1:
            found = self.recorded.get(CaseRunKey(next(iter(suites)), loaded.id, run_index, agent))
        if found is not None:
            return found
        if len(suites) > 1 and not same:
            named = ", ".join(shown(each) for each in sorted(suites))
            return f"the run has case '{shown(loaded.id)}' in several suites ({named}): rescore with the suites' own files"
        return f"the run has no result for case '{shown(loaded.id)}'" + (f" (run {run_index + 1})" if run_index else "")

    async def run(self, loaded: LoadedCase, run_index: int, services: Services | None, settings: RunSettings) -> CaseResult:
        """Rescore one run of one case: the new result (never raises for the case's own problems)."""
        result = await self._run(loaded.materialized(), run_index, services, settings)
        result.rescored_from = self.source
        if result.rescorable is None:
            result.rescorable = True
        return result

    async def _run(self, loaded: LoadedCase, run_index: int, services: Services | None, settings: RunSettings) -> CaseResult:
        recorded = self.lookup(loaded, run_index, settings.agent_id)
        if isinstance(recorded, str):
            return not_rescorable(loaded, settings, recorded)
        skip = loaded.case.skip_reason() if loaded.case is not None else None
        if not recorded.turns and (recorded.status == Status.SKIPPED or recorded.mode is None):
            if loaded.ok and not skip:
                return not_rescorable(loaded, settings, "the run has no conversation for it (it was skipped or did not load)")
            kept = recorded.model_copy(deep=True)  # skipped or not loaded in the run, and now: as recorded
            kept.run_id, kept.run_index = settings.run_id, run_index
            return kept
        if not loaded.ok:
            return error_result(loaded, settings, loaded.error or "the case did not load")
        assert loaded.case is not None  # materialized(): a case that loaded holds its model
        if skip:
            return error_result(loaded, settings, skip, Status.SKIPPED)
        if loaded.script:
            return not_rescorable(loaded, settings, "a script test drives the agent from Python, and only conversations are replayed")
        reason = changed_inputs(recorded.inputs_digest, inputs_digest(loaded.case, settings), recorded.turns, loaded.case)
        if reason is None:
            clipped = next((t.turn for t in recorded.turns if t.output_chars or any(s.content_chars for s in t.replies)), None)
            if clipped is not None:
                reason = f"turn {clipped}'s reply was cut to 64 Ki characters in the results"
        if reason is not None:
            return not_rescorable(loaded, settings, reason)

        clock = ReplayClock()
        client = ReplayClient(recorded, clock, {**settings.agent_tool_mocks, **loaded.case.tool_mocks})
        replay_services = ReplayServices(services, recorded, client) if services is not None else None
        result = await run_case(loaded, client, replay_services, dataclasses.replace(settings, clock=clock))
        ended = client.ended or (replay_services is not None and replay_services.ended)
        if ended:
            if not _ended_by_recording(recorded) or len(result.turns) > len(recorded.turns):
                where = f"turn {len(recorded.turns)}" if recorded.turns else "its start"
                return not_rescorable(loaded, settings, f"the run's conversation ends at {where} ({recorded.status.value}), and the edited case goes on past it")
            # the replay reached the recording's end, which was an error, a timeout or a simulator error
            result.status, result.error, result.ended_by = recorded.status, recorded.error, recorded.ended_by
            result.error_role = recorded.error_role
            if recorded.ended_by == "unreachable":  # it stopped the live run; a rescore of its record goes on
                result.ended_by = "agent"
            if (recorded.error or "").startswith("simulator error"):  # recorded as skipped before: an error of the simulator
                result.status, result.error_role = Status.ERROR, "simulator"
            del result.turns[len(recorded.turns):]
            if result.turns:
                result.turns[-1].error = recorded.turns[-1].error
            result.total_turns = len(result.turns)
        for turn, was in zip(result.turns, recorded.turns, strict=False):
            turn.duration_ms, turn.queued_ms = was.duration_ms, was.queued_ms
        result.duration_ms, result.started_at = recorded.duration_ms, recorded.started_at
        return result


def _ended_by_recording(recorded: CaseResult) -> bool:
    """Whether the recorded conversation ended because of the agent, a tool mock, the simulator
    or the case's timeout (which a replay reproduces), not because an assertion stopped it."""
    if recorded.ended_by is not None:
        return True
    if recorded.status not in (Status.ERROR, Status.TIMEOUT, Status.SKIPPED):
        return False
    # a result written before ``ended_by`` existed: its error text tells
    error = recorded.error or ""
    last = recorded.turns[-1] if recorded.turns else None
    return bool(last and last.error) or error.startswith(("simulator error", "the case did not finish")) or "tool mock" in error
