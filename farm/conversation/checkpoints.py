"""Checkpoint progress in a simulator-driven conversation (docs/reference/cases.md).

Bookkeeping: after each turn the caller (the conversation runner, or a replay
of a recorded conversation) has the :class:`CheckpointTracker` check the
checkpoints that are ready, those whose ``after`` ids are all reached, with a
function that evaluates one; the tracker applies the ``after`` order and says
what is still missing::

    tracker = CheckpointTracker(case.checkpoints)
    for each turn:
        outcomes = await tracker.check(turn_number, evaluate_one)
        if tracker.complete: ...                  # every required checkpoint reached
        else: ", ".join(tracker.missing)          # the required ones not reached yet

A checkpoint whose ``after`` ids are not reached is not evaluated at all: no
judge call is spent on it, and a judge's failure on it cannot end the case.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from farm.cases import Checkpoint
from farm.results import AssertionResult, CheckpointResult

__all__ = ["CheckpointTracker"]


class CheckpointTracker:
    """The checkpoints of one conversation, and which of them are reached at which turn.

    A checkpoint is reached at the first turn where its assertion passes and
    every checkpoint it is ``after`` is reached, one reached earlier in the same
    turn included. ``required: false`` checkpoints are tracked but never missing.
    """

    def __init__(self, checkpoints: Sequence[Checkpoint]):
        self._pending = list(checkpoints)
        self._results = {cp.id: CheckpointResult(id=cp.id, description=cp.description, required=cp.required) for cp in checkpoints}

    @property
    def results(self) -> list[CheckpointResult]:
        """One record per checkpoint, in the case's order; :meth:`apply` updates them in place."""
        return list(self._results.values())

    @property
    def pending(self) -> list[Checkpoint]:
        """The checkpoints not reached yet, in the case's order: those to evaluate after the next turn."""
        return list(self._pending)

    @property
    def ready(self) -> list[Checkpoint]:
        """The pending checkpoints whose ``after`` ids are all reached: those worth evaluating now."""
        return [cp for cp in self._pending if all(self._results[a].reached for a in cp.after)]

    async def check(self, turn: int, evaluate: Callable[[Checkpoint], Awaitable[AssertionResult]]) -> dict[str, AssertionResult]:
        """Evaluate the ready checkpoints after ``turn`` and apply the outcomes, again while one
        reached frees another; returns the outcomes by id. The first outcome with ``error``
        ends the checks (the conversation ends with it)."""
        outcomes: dict[str, AssertionResult] = {}
        while True:
            todo = [cp for cp in self.ready if cp.id not in outcomes]
            if not todo:
                return outcomes
            for cp in todo:
                outcome = outcomes[cp.id] = await evaluate(cp)
                if outcome.error:
                    self.apply(turn, outcomes)
                    return outcomes
            if not self.apply(turn, outcomes):
                return outcomes

    @property
    def missing(self) -> list[str]:
        """The ids of the required checkpoints not reached yet."""
        return [r.id for r in self._results.values() if r.required and not r.reached]

    @property
    def complete(self) -> bool:
        """Every required checkpoint is reached."""
        return not self.missing

    def apply(self, turn: int, outcomes: Mapping[str, AssertionResult]) -> list[str]:
        """Take the outcomes of one turn's checks, by checkpoint id; returns the ids reached at ``turn``.

        Each pending checkpoint's record keeps its latest outcome. Outcomes of
        checkpoints not pending are ignored, and a pending checkpoint without
        one stays pending. An outcome with ``error`` is recorded and ends the
        turn's bookkeeping there, as the conversation ends with it: the
        checkpoints before it in the case's order may still be reached, the
        ones after it are left as they were.
        """
        reached: list[str] = []
        progressed = True
        while progressed:  # a checkpoint reached later in the list may free an earlier one
            progressed = False
            for cp in list(self._pending):
                outcome = outcomes.get(cp.id)
                if outcome is None:
                    continue
                record = self._results[cp.id]
                record.assertion = outcome
                if outcome.error:
                    return reached
                if outcome.passed and all(self._results[a].reached for a in cp.after):
                    record.reached, record.reached_at_turn = True, turn
                    self._pending.remove(cp)
                    reached.append(cp.id)
                    progressed = True
        return reached
