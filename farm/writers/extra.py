"""The result writers a run adds on request beside its JSONL and Parquet, in one table: the
JUnit XML, the HTML report and the NDJSON events. A new report format is a row here and a
``for_run`` function beside its writer; :func:`farm.run`, :func:`farm.rescore` and the CLI name
it by its keyword.

Each row names its maker as ``module:function``, imported only when the run asks for it (as
:data:`farm.engines.ENGINES` names the engines), so no writer loads for a run that wants none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from farm.writers.base import ResultWriter

if TYPE_CHECKING:
    from farm.writers.runinfo import RunGate

__all__ = ["EXTRA_WRITERS", "ExtraWriter", "ReportFile", "extra_writers"]


class ReportFile(ResultWriter, Protocol):
    """A report written to a file: the summary names it by ``label`` and ``path``."""

    label: str
    path: Path


@dataclass(frozen=True)
class ExtraWriter:
    """One format a run may be asked to write besides its results."""

    keyword: str
    """Its keyword of :func:`farm.run` and :func:`farm.rescore` (a path, or True for a stream)."""
    maker: str
    """``module:function`` making the writer: ``(value, run_id, info, gate) -> ResultWriter``."""
    stream: bool = False
    """True: written to standard output as results arrive; False: a report file, named in the summary."""

    def make(self, value: Any, run_id: str, info: dict[str, Any], gate: Callable[[], RunGate | None] | None) -> Any:
        module, name = self.maker.split(":")
        return getattr(importlib.import_module(module), name)(value, run_id, info, gate)


EXTRA_WRITERS = (
    ExtraWriter("json_events", "farm._run.events:for_run", stream=True),
    ExtraWriter("junit", "farm.reports.junit:for_run"),
    ExtraWriter("html", "farm.reports.html:for_run"),
)
"""Every extra writer, in the order a run opens them."""


def extra_writers(
    asked: object,
    run_id: str,
    info: dict[str, Any],
    gate: Callable[[], RunGate | None] | None = None,
) -> tuple[list[ReportFile], list[ResultWriter]]:
    """``(reports, streams)``: the writers ``asked`` (a run's request) sets a value of, by their keyword
    (a path, or True); ``info``: the run's facts for their heads (``run_start``); ``gate``: the run's gate once
    decided, for the events' ``summary``."""
    reports: list[ReportFile] = []
    streams: list[ResultWriter] = []
    for writer in EXTRA_WRITERS:
        value = getattr(asked, writer.keyword, None)
        if value:
            (streams if writer.stream else reports).append(writer.make(value, run_id, info, gate))
    return reports, streams
