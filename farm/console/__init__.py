"""The console reporter: the seed's banner, case trees, live progress and summary.

:class:`ConsoleReporter` prints to a :class:`rich.console.Console` the caller
builds (``Console(file=..., force_terminal=..., no_color=...)``), so the same
code writes colour to a terminal and plain text to a pipe or a test's
``StringIO``. Outside verbose mode a passed case is one line and only the
cases that need a look (failed, error, timeout, skipped) print their tree,
so a suite of thousands stays readable.

:meth:`ConsoleReporter.summary` prints a :class:`~farm.summary.Summary`, the
run's tally.

The parts, one module each: :mod:`~farm.console.safe` (a console that neutralises
control characters), :mod:`~farm.console.tree` (a case's line or tree),
:mod:`~farm.console.progress` (the live progress line), :mod:`~farm.console.summary`
(the summary block and its Stability table) and :mod:`~farm.console.reporter`
(the reporter that lays them out).
"""

from farm.console.reporter import ConsoleReporter
from farm.console.safe import neutralise

__all__ = ["ConsoleReporter", "neutralise"]
