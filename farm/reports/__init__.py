"""Reports on results: JUnit XML and an HTML page written during a run, and the analysis behind ``farm report``.

- :class:`~farm.reports.junit.JUnitWriter` and :class:`~farm.reports.html.HTMLWriter`
  are :class:`~farm.writers.ResultWriter` implementations fed every result as it arrives.
- :func:`~farm.reports.analysis.analyse` reads one or many runs' Parquet
  tables (or a results JSONL file; :mod:`~farm.reports.runs` finds and reads
  them) and returns a :class:`~farm.reports.models.Report`, with per agent statistics and
  paired comparisons (:mod:`~farm.reports.agentstats`) computed by the pure functions of
  :mod:`~farm.reports.stats` (Wilson and case-clustered intervals, pass@k, pass^k, the paired difference and its tests, Holm).
"""

from farm.reports.analysis import Report, analyse, find_runs
from farm.reports.html import HTMLWriter
from farm.reports.junit import JUnitWriter

__all__ = ["HTMLWriter", "JUnitWriter", "Report", "analyse", "find_runs"]
