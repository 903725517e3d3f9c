"""The one interface every results writer implements, and a writer that fans out to several."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Protocol, TypeVar, runtime_checkable

from farm.results._records import CaseResult
from farm.secrets import Scrubber, scrub_result

_W = TypeVar("_W", bound="ClosingWriter")

__all__ = ["ClosingWriter", "CountsEarlier", "MultiWriter", "ResultWriter"]


@runtime_checkable
class ResultWriter(Protocol):
    """Where finished :class:`~farm.results.CaseResult` records go.

    A writer makes each result durable on its own schedule; ``flush`` forces
    that now and may be costly (a Parquet writer writes a part file per call),
    so call it at checkpoints rather than after every result. ``close`` is
    final and safe to call twice.
    """

    def write(self, result: CaseResult) -> None:
        """Record one finished case run."""
        ...

    def flush(self) -> None:
        """Make everything written so far durable."""
        ...

    def close(self) -> None:
        """Flush, finish the output and release it; later writes raise."""
        ...


@runtime_checkable
class CountsEarlier(Protocol):
    """A live writer (fed this part's results only) whose end sums up the whole run: on ``--resume``
    it is told each result of the run's earlier parts first, to count, not to write."""

    def count_earlier(self, result: CaseResult) -> None:
        """Count ``result``, of an earlier part of the run, in what the writer sums up at its end."""
        ...


class ClosingWriter:
    """``with Writer(...) as w:`` closes the writer (its ``close``) at the end of the block."""

    def __enter__(self: _W) -> _W:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class MultiWriter(ClosingWriter):
    """Hands every call to each of ``writers``, in order.

    Every writer gets every call even when an earlier one raised, so one
    broken output does not cost the others a result; the first error is then
    raised, with the others attached as notes.

    Before any writer sees a result, its secrets are masked in place
    (:func:`farm.secrets.scrub_result`; ``scrubber`` defaults to the process's,
    which knows every config's keys), so what is printed after it is clean too.
    """

    def __init__(self, writers: Iterable[ResultWriter], scrubber: Scrubber | None = None):
        self.writers: list[ResultWriter] = list(writers)
        self.scrubber = scrubber

    def write(self, result: CaseResult) -> None:
        scrub_result(result, self.scrubber)
        self._each(lambda writer: writer.write(result))

    def flush(self) -> None:
        self._each(lambda writer: writer.flush())

    def close(self) -> None:
        self._each(lambda writer: writer.close())

    def _each(self, call: Callable[[ResultWriter], None]) -> None:
        errors: list[Exception] = []
        for writer in self.writers:
            try:
                call(writer)
            except Exception as exc:  # the other writers still get their call
                errors.append(exc)
        if errors:
            first = errors[0]
            for other in errors[1:]:
                first.add_note(f"another writer also failed: {type(other).__name__}: {other}")
            raise first
