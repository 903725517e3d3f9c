"""A self-contained HTML report: ``farm test --html PATH``.

One page with no network access at all (inline CSS, inline SVG computed
here, a few lines of inline JavaScript): the run's numbers, a donut of
statuses, a histogram of turn latency, and every case run's conversation —
turns with input and reply, tool calls with arguments and results,
assertion and checkpoint results — as collapsible sections that buttons
filter by status. Cases that did not pass start open.

The numbers are text in elements with stable ids, for people and for tests:
``count-total``, ``count-passed``, ``count-failed``, ``count-skipped``,
``count-error``, ``count-timeout``, ``pass-rate`` (passed / (total -
skipped), e.g. ``66.7%``), ``total-turns``, ``avg-turns``,
``total-duration`` (sum of case durations; ``data-ms`` holds milliseconds),
``total-tokens``, ``prompt-tokens``, ``completion-tokens``,
``latency-avg`` and ``latency-max`` (turn latency), ``run-id``; where a connector has
a ``price``, ``cost-usd`` (the agents under test) and ``role-cost-usd`` (simulator and
judge); with several agents under test, a table ``agents`` with a row
``agent-<n>`` per agent (``data-agent``), no pass rate or latency of them all together
but each agent's own (``pass-rate-<n>``, ``latency-avg-<n>``, ``latency-max-<n>``, a
histogram ``latency-chart-<n>``), and each case names its agent
(``data-agent`` on every case section). With several suites, whose case ids may repeat (every
suite may have its ``greet``), each case names its suite before its id (``data-suite`` on every
case section holds it in any run). A run that stopped before every case ran (``--max-cost``,
``--fail-fast``, its generator's error, an interrupt) says so at the top, in ``stopped``: why, and
how many case runs did not run (the counts are of those that did). The script
writes how many case sections the filter shows into ``visible-count`` and
the active filter into ``active-filter``; the filter can also be chosen with
the URL's fragment (``report.html#failed``). Each case is a
``<details class="case" data-status="...">``.

Memory stays flat: each case's section is rendered to a temporary file
beside ``path`` as its result arrives, and only counters and histogram
buckets are kept; ``close`` writes the page head (the numbers are known
then), copies the sections after it and renames the page into place.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from datetime import datetime
from html import escape
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from farm.durations import format_duration
from farm.excerpts import MORE_CHARACTERS, clip
from farm.jsontext import pretty_json
from farm.reports.streamed import StreamedReport
from farm.results import AssertionResult, CaseResult, CheckpointResult, Status, TurnResult
from farm.results import format_usd as usd
from farm.summary import Summary

if TYPE_CHECKING:
    from farm.writers.runinfo import RunGate

__all__ = ["HTMLWriter", "for_run", "LATENCY_BUCKETS_MS"]

#: Upper edges (ms) of the turn latency histogram's buckets; a last bucket holds the rest.
LATENCY_BUCKETS_MS = (100, 250, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000)
#: Longest text shown for one input, reply or value; the rest is cut with a note.
TEXT_LIMIT = 20_000

_COLORS = {  # the viewer's (farm/view/static/style.css); the page's style takes them from here
    Status.PASSED: "#1a7f37",
    Status.FAILED: "#cf222e",
    Status.ERROR: "#bc4c00",
    Status.TIMEOUT: "#8250df",
    Status.SKIPPED: "#9a6700",
}


class HTMLWriter(StreamedReport):
    """A :class:`~farm.writers.ResultWriter` that writes the HTML report to ``path`` on ``close``."""

    label = "HTML"

    def __init__(
        self,
        path: str | os.PathLike[str],
        run_id: str,
        *,
        title: str | None = None,
        gate: Callable[[], RunGate | None] | None = None,
    ):
        super().__init__(path, run_id)
        self.title = title or f"Agent Test Farm — run {run_id}"
        self.gate = gate
        """The run's gate once decided (before the outputs close): a run that stopped early says so at the top."""
        self._latency = _Latency()
        self._agent_latency: dict[str, _Latency] = {}
        """Each agent's own, in the order of ``summary.agents``: a run of several shows no latency of them all together."""

    def tally(self, result: CaseResult) -> None:
        super().tally(result)
        own = self._agent_latency.setdefault(result.agent or "", _Latency())
        for turn in result.turns:
            self._latency.add(turn.duration_ms)
            own.add(turn.duration_ms)

    def render(self, result: CaseResult) -> str:
        return case_section(result, self.summary.total)

    def foot(self) -> str:
        return _FOOT

    def _latencies(self) -> list[tuple[str, str | None, _Latency]]:
        """(id suffix, agent, latency): the run's, or with several agents each agent's own."""
        if not self.summary.several_agents:
            return [("", None, self._latency)]
        return [
            (f"-{number}", agent, self._agent_latency.get(agent, _Latency())) for number, agent in enumerate(self.summary.agents)
        ]

    def _latency_cards(self) -> list[str]:
        cards = []
        for suffix, agent, latency in self._latencies():
            of = "" if agent is None else f" of {agent}"
            if agent is not None:  # an agent's pass rate beside its latency: the agents table has its counts
                rate = self.summary.agents[agent].pass_rate
                cards.append(_card(f"pass-rate{suffix}", "—" if rate is None else f"{rate:.1%}", f"pass rate{of}"))
            cards.append(_card(f"latency-avg{suffix}", f"{latency.average:.0f} ms", f"avg turn latency{of}"))
            cards.append(_card(f"latency-max{suffix}", f"{latency.most:.0f} ms", f"max turn latency{of}"))
        return cards

    def _latency_figures(self) -> str:
        return "\n".join(
            f"<figure><figcaption>Turn latency{escape('' if agent is None else f' of {agent}')} ({latency.count} turns)</figcaption>"
            f"{_histogram(latency.buckets, suffix)}</figure>"
            for suffix, agent, latency in self._latencies()
        )

    def _stopped(self) -> str:
        """The line at the top of a run that stopped before every case ran; "" for one that ran them all."""
        from farm.gate import STOPPED
        from farm.wording import plural

        gate = self.gate() if self.gate is not None else None
        if gate is None or not gate.stopped:
            return ""
        why = STOPPED.get(gate.stopped, "the run stopped early")
        said = f"{why[:1].upper()}{why[1:]}: {plural(gate.not_run, 'case run')} not run; the figures below are of those that ran."
        return f'<p class="stopped" id="stopped" role="alert" data-reason="{escape(gate.stopped)}" data-not-run="{gate.not_run}">{escape(said)}</p>\n'

    # -- the page head: summary, charts, filters

    def head(self) -> str:
        summary = self.summary
        counts, total = summary.counts, summary.total
        pass_rate = "—" if summary.pass_rate is None else f"{summary.pass_rate:.1%}"
        several = summary.several_agents
        everyone = " (all agents)" if several else ""
        span = ""
        if summary.first_start is not None and summary.span_seconds is not None:
            start = datetime.fromtimestamp(summary.first_start).astimezone()
            span = f"started {start.isoformat(timespec='seconds')}, wall span {format_duration(summary.span_seconds)}; "
        generated = datetime.fromtimestamp(time.time()).astimezone().isoformat(timespec="seconds")

        cards = [
            _card("count-total", total, "total" + everyone),
            *(_card(f"count-{status.value}", counts[status], status.value + everyone, status.value) for status in Status),
            *([] if several else [_card("pass-rate", pass_rate, f"pass rate ({'skipped and role errors' if summary.role_errors else 'skipped'} excluded)")]),
            _card("total-turns", summary.total_turns, "turns" + everyone),
            _card("avg-turns", f"{summary.avg_turns:.1f}", "avg turns / case" + everyone),
            _card(
                "total-duration",
                format_duration(summary.duration_ms / 1000),
                "case time (sum)" + everyone,
                attrs=f' data-ms="{summary.duration_ms:.0f}"',
            ),
            _card("total-tokens", summary.total_tokens, "tokens" + everyone),
            _card("prompt-tokens", summary.prompt_tokens, "prompt tokens" + everyone),
            _card("completion-tokens", summary.completion_tokens, "completion tokens" + everyone),
            *self._latency_cards(),
        ]
        if summary.cost_usd is not None:
            cards.append(_card("cost-usd", usd(summary.cost_usd), "agent cost (USD)", attrs=f' data-usd="{summary.cost_usd!r}"'))
        if summary.role_cost_usd is not None:
            cards.append(
                _card(
                    "role-cost-usd",
                    usd(summary.role_cost_usd),
                    "simulator, judge and generator cost",
                    attrs=f' data-usd="{summary.role_cost_usd!r}"',
                )
            )
        buttons = [f'<button type="button" class="filter" id="filter-all" data-filter="all">All <b>{total}</b></button>']
        buttons += [
            f'<button type="button" class="filter {s.value}" id="filter-{s.value}" data-filter="{s.value}">'
            f"{s.value.capitalize()} <b>{counts[s]}</b></button>"
            for s in Status
        ]
        return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{escape(self.title)}</title>
<style>{_CSS}{_SHOW_AGENTS if summary.several_agents else ""}{_SHOW_SUITES if summary.several_suites else ""}</style>
</head>
<body>
<header>
<h1>{escape(self.title)}</h1>
<p class="muted">Run <code id="run-id">{escape(self.run_id)}</code>; {escape(span)}report written {escape(generated)}.</p>
</header>
{self._stopped()}<section class="cards" aria-label="Summary">
{"".join(cards)}
</section>
{_agents_table(summary) if summary.several_agents else ""}<section class="charts">
<figure><figcaption>Statuses{everyone}</figcaption>{_donut(counts)}</figure>
{self._latency_figures()}
</section>
<nav class="filters" aria-label="Filter cases by status">
{"".join(buttons)}
<span class="muted">showing <b id="visible-count"></b> case runs (<span id="active-filter"></span>)</span>
<button type="button" id="expand-all">Expand all</button><button type="button" id="collapse-all">Collapse all</button>
</nav>
<main id="cases">
"""


_FOOT = """</main>
<script>
(function () {
  var cases = Array.prototype.slice.call(document.querySelectorAll("details.case"));
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button.filter"));
  var known = buttons.map(function (b) { return b.getAttribute("data-filter"); });
  function apply(status) {
    if (known.indexOf(status) < 0) { status = "all"; }
    var shown = 0;
    cases.forEach(function (c) {
      var show = status === "all" || c.getAttribute("data-status") === status;
      c.hidden = !show;
      if (show) { shown += 1; }
    });
    buttons.forEach(function (b) {
      var on = b.getAttribute("data-filter") === status;
      b.classList.toggle("active", on);
      b.setAttribute("aria-pressed", on ? "true" : "false");
    });
    document.getElementById("visible-count").textContent = String(shown);
    document.getElementById("active-filter").textContent = status;
  }
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      var status = b.getAttribute("data-filter");
      try { history.replaceState(null, "", "#" + status); } catch (e) { /* file: URLs may refuse */ }
      apply(status);
    });
  });
  function openAll(open) {
    cases.forEach(function (c) { if (!c.hidden) { c.open = open; } });
  }
  document.getElementById("expand-all").addEventListener("click", function () { openAll(true); });
  document.getElementById("collapse-all").addEventListener("click", function () { openAll(false); });
  var wanted = location.hash.replace(/^#/, "");
  try { wanted = decodeURIComponent(wanted); } catch (e) { /* a stray %: not a filter, so all */ }
  apply(wanted || "all");
})();
</script>
</body>
</html>
"""

_SHOW_AGENTS = """
span.agent { display: inline; color: var(--muted); margin-right: .5em; }
#agents { border-collapse: collapse; margin: 1em 0; }
#agents td, #agents th { padding: .2em .8em; text-align: right; }
#agents td:first-child, #agents th:first-child { text-align: left; }
"""
"""The style that shows each case's agent and the agents table: only in a run of several agents."""

_SHOW_SUITES = """
span.suite { display: inline; color: var(--muted); margin-right: .5em; }
"""
"""The style that shows each case's suite before its id: only in a run of several suites."""

_CSS = """
:root { --fg: #1f2328; --muted: #656d76; --bg: #fff; --panel: #f6f8fa; --line: #d0d7de;
  STATUS_COLORS }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #8d96a0; --bg: #0d1117; --panel: #161b22; --line: #30363d; }
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1200px; padding: 1rem 1.5rem 3rem; color: var(--fg); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 1.4rem; margin: .5rem 0; }
span.agent, span.suite { display: none; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { white-space: pre-wrap; word-break: break-word; margin: .2rem 0; padding: .4rem .6rem;
  background: var(--panel); border: 1px solid var(--line); border-radius: 6px; }
.muted { color: var(--muted); }
.stopped { border: 1px solid var(--failed); border-left-width: 6px; border-radius: 8px; padding: .6rem .8rem; color: var(--failed); font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(130px, 1fr)); gap: .5rem; margin: 1rem 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: .5rem .7rem; }
.card .num { font-size: 1.35rem; font-weight: 600; }
.card .lbl { color: var(--muted); font-size: 12px; }
.card.passed .num { color: var(--passed); } .card.failed .num { color: var(--failed); }
.card.error .num { color: var(--error); } .card.timeout .num { color: var(--timeout); }
.card.skipped .num { color: var(--skipped); }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: .3rem; }
svg text { fill: var(--fg); font: 11px system-ui, sans-serif; }
.filters { position: sticky; top: 0; background: var(--bg); padding: .6rem 0; margin: 1rem 0 .5rem;
  border-bottom: 1px solid var(--line); display: flex; flex-wrap: wrap; gap: .4rem; align-items: center; z-index: 1; }
button { font: inherit; padding: .25rem .7rem; border-radius: 999px; border: 1px solid var(--line);
  background: var(--panel); color: var(--fg); cursor: pointer; }
button.active { outline: 2px solid var(--fg); }
button.passed b { color: var(--passed); } button.failed b { color: var(--failed); }
button.error b { color: var(--error); } button.timeout b { color: var(--timeout); }
button.skipped b { color: var(--skipped); }
details.case { border: 1px solid var(--line); border-left: 4px solid var(--line); border-radius: 6px;
  margin: .4rem 0; background: var(--bg); }
details.case[data-status=passed] { border-left-color: var(--passed); }
details.case[data-status=failed] { border-left-color: var(--failed); }
details.case[data-status=error] { border-left-color: var(--error); }
details.case[data-status=timeout] { border-left-color: var(--timeout); }
details.case[data-status=skipped] { border-left-color: var(--skipped); }
details.case > summary { cursor: pointer; padding: .45rem .7rem; }
.case-body { padding: 0 .9rem .8rem; }
.badge { display: inline-block; min-width: 5.2em; text-align: center; font-size: 11px; font-weight: 700;
  color: #fff; border-radius: 4px; padding: 0 .4em; margin-right: .4em; }
.badge.passed { background: var(--passed); } .badge.failed { background: var(--failed); }
.badge.error { background: var(--error); } .badge.timeout { background: var(--timeout); }
.badge.skipped { background: var(--skipped); }
.facts { display: flex; flex-wrap: wrap; gap: .2rem 1.2rem; margin: .3rem 0 .6rem; color: var(--muted); }
.problem { color: var(--failed); font-weight: 600; }
.note { color: var(--skipped, #a60); font-weight: 600; }
.turn { border-top: 1px dashed var(--line); padding: .4rem 0; }
.turn-head { font-weight: 600; }
.who { font-size: 12px; color: var(--muted); }
.tool { margin: .3rem 0 .3rem 1rem; }
.tool .label { font-size: 12px; color: var(--muted); }
ul.checks { list-style: none; padding-left: .3rem; margin: .3rem 0; }
ul.checks li.ok::before { content: "✓ "; color: var(--passed); font-weight: 700; }
ul.checks li.bad::before { content: "✗ "; color: var(--failed); font-weight: 700; }
ul.checks li.opt::before { content: "○ "; color: var(--muted); }
pre.diff span.del { color: var(--failed); } pre.diff span.ins { color: var(--passed); }
h3 { font-size: 1rem; margin: .7rem 0 .2rem; }
""".replace("STATUS_COLORS", " ".join(f"--{status.value}: {color};" for status, color in _COLORS.items()))


def _agents_table(summary: Summary) -> str:
    """Each agent's counts and cost, side by side, for a run that tested several."""
    priced = any(entry.cost_usd is not None for entry in summary.agents.values())
    head = "".join(
        f"<th>{escape(name)}</th>"
        for name in ["agent", "total", *(s.value for s in Status), "pass rate", *(["cost"] if priced else [])]
    )
    rows = []
    for number, (agent, entry) in enumerate(summary.agents.items()):
        rate = "—" if entry.pass_rate is None else f"{entry.pass_rate:.1%}"
        cells = [f"<td><code>{escape(agent)}</code></td>", f"<td>{entry.total}</td>"]
        cells += [f'<td class="{s.value}">{entry.counts[s]}</td>' for s in Status]
        cells.append(f"<td>{rate}</td>")
        if priced:
            cells.append(f"<td>{escape(usd(entry.cost_usd))}</td>")
        rows.append(f'<tr id="agent-{number}" data-agent="{escape(agent)}">{"".join(cells)}</tr>')
    return f'<section aria-label="Agents"><table id="agents"><tr>{head}</tr>{"".join(rows)}</table></section>\n'


def _card(element_id: str, value: Any, label: str, css: str = "", attrs: str = "") -> str:
    return (
        f'<div class="card {css}"><div class="num" id="{element_id}"{attrs}>{escape(str(value))}</div>'
        f'<div class="lbl">{escape(label)}</div></div>'
    )


def _bucket(ms: float) -> int:
    for index, edge in enumerate(LATENCY_BUCKETS_MS):
        if ms < edge:
            return index
    return len(LATENCY_BUCKETS_MS)


def _latency_labels() -> list[str]:
    """``<100ms``, ``100–250ms``, …, ``0.5–1s``, …, ``≥60s``."""

    def span(low: int, high: int) -> str:
        return f"{low / 1000:g}–{high / 1000:g}s" if high >= 1000 else f"{low}–{high}ms"

    def single(ms: int) -> str:
        return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms}ms"

    edges = LATENCY_BUCKETS_MS
    return [f"<{single(edges[0])}", *(span(low, high) for low, high in pairwise(edges)), f"≥{single(edges[-1])}"]


# --- charts (inline SVG) -----------------------------------------------------


def _donut(counts: dict[Status, int]) -> str:
    """A donut of status shares (a circle of circumference 100, one dashed stroke per status)."""
    total = sum(counts.values())
    parts = [
        '<svg id="status-chart" width="320" height="160" viewBox="0 0 320 160" role="img" aria-label="Statuses">',
        '<g transform="translate(80 80) scale(4) rotate(-90)">',
        '<circle r="15.9155" fill="none" stroke="#d0d7de" stroke-width="5"/>',
    ]
    offset = 0.0
    for status in Status:
        share = 100.0 * counts[status] / total if total else 0.0
        if share:
            parts.append(
                f'<circle r="15.9155" fill="none" stroke="{_COLORS[status]}" stroke-width="5" '
                f'stroke-dasharray="{share:.3f} {100 - share:.3f}" stroke-dashoffset="{-offset:.3f}">'
                f"<title>{status.value}: {counts[status]}</title></circle>"
            )
        offset += share
    parts.append("</g>")
    parts.append(f'<text x="80" y="84" text-anchor="middle" style="font-size:16px;font-weight:600">{total}</text>')
    for row, status in enumerate(Status):
        y = 28 + row * 24
        parts.append(f'<rect x="172" y="{y - 10}" width="12" height="12" rx="2" fill="{_COLORS[status]}"/>')
        parts.append(f'<text x="190" y="{y}">{status.value} {counts[status]}</text>')
    parts.append("</svg>")
    return "".join(parts)


class _Latency:
    """Turn latencies tallied: a histogram's buckets, their sum, the longest and how many."""

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.total_ms = 0.0
        self.most = 0.0
        self.count = 0

    def add(self, ms: float) -> None:
        self.buckets[_bucket(ms)] += 1
        self.total_ms += ms
        self.most = max(self.most, ms)
        self.count += 1

    @property
    def average(self) -> float:
        return self.total_ms / self.count if self.count else 0.0


def _histogram(buckets: list[int], suffix: str = "") -> str:
    """Bars of turn counts per latency bucket (``suffix`` ends the chart's id: ``-<n>`` for the n-th agent)."""
    width, height, left, bottom, top = 580, 170, 8, 34, 16
    slot = (width - left) / len(buckets)
    peak = max(buckets) or 1
    labels = _latency_labels()
    parts = [
        f'<svg id="latency-chart{suffix}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="Turn latency histogram">'
    ]
    usable = height - bottom - top
    for index, (count, label) in enumerate(zip(buckets, labels, strict=True)):
        x = left + index * slot
        bar = math.ceil(usable * count / peak) if count else 0
        y = height - bottom - bar
        parts.append(
            f'<rect x="{x + 3:.1f}" y="{y}" width="{slot - 6:.1f}" height="{bar}" rx="2" fill="#0969da">'
            f"<title>{escape(label)}: {count}</title></rect>"
        )
        if count:
            parts.append(f'<text x="{x + slot / 2:.1f}" y="{y - 3}" text-anchor="middle">{count}</text>')
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle" '
            f'style="font-size:9.5px">{escape(label)}</text>'
        )
    parts.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" stroke="#8c959f"/></svg>')
    return "".join(parts)


# --- one case ----------------------------------------------------------------


def case_section(result: CaseResult, number: int) -> str:
    """The collapsible ``<details>`` of one case run; ``number`` makes its element id unique."""
    status = Status(result.status)
    turns = result.total_turns or len(result.turns)
    meta = [f"{turns} turn{'s' if turns != 1 else ''}", format_duration(result.duration_ms / 1000)]
    if result.run_index:
        meta.insert(0, f"run {result.run_index + 1}")
    if result.attempt > 1:
        meta.insert(0, f"attempt {result.attempt}")
    agent, suite = escape(result.agent or ""), escape(result.suite)
    out = [
        f'<details class="case" id="case-{number}" data-status="{status.value}" data-case-id="{escape(result.id)}"'
        f' data-agent="{agent}" data-suite="{suite}"{"" if status is Status.PASSED else " open"}>',
        f'<summary><span class="badge {status.value}">{status.value.upper()}</span>'
        # shown by the page's style only when the run tested several agents, or ran several suites
        # (known once every result is in)
        f'<span class="agent">{agent}</span><span class="suite">{suite}</span>'
        f"<code>{escape(result.id)}</code> {escape(result.name or '')} "
        f'<span class="muted">({escape(" · ".join(meta))})</span></summary>',
        '<div class="case-body">',
    ]
    facts = [
        ("agent", result.agent),
        ("mode", result.mode),
        ("source", result.source),
        ("tags", ", ".join(result.tags)),
        ("worker", result.worker),
        (
            "tokens",
            f"{result.usage.total_tokens} ({result.usage.prompt_tokens} prompt, {result.usage.completion_tokens} completion)",
        ),
        ("cost", None if result.cost_usd is None else usd(result.cost_usd)),
        ("simulator and judge cost", None if result.role_cost_usd is None else usd(result.role_cost_usd)),
    ]
    out.append(
        '<div class="facts">'
        + "".join(f"<span>{escape(label)}: <code>{escape(str(value))}</code></span>" for label, value in facts if value)
        + "</div>"
    )
    if result.error:
        out.append(f'<p class="problem">{escape(_clip(result.error))}</p>')
    if result.awaiting_question:
        out.append(f"<p>Agent asked: <q>{escape(_clip(result.awaiting_question))}</q></p>")
    if result.hint:
        out.append(f'<p class="muted">Hint: {escape(_clip(result.hint))}</p>')
    out.extend(_turn(turn) for turn in result.turns)
    if result.final_assertions:
        out.append("<h3>Final assertions</h3>")
        out.append(_checks(result.final_assertions))
    if result.checkpoints:
        out.append("<h3>Checkpoints</h3>")
        out.append('<ul class="checks">' + "".join(_checkpoint(c) for c in result.checkpoints) + "</ul>")
    out.append("</div></details>\n")
    return "".join(out)


def _turn(turn: TurnResult) -> str:
    head = [f"Turn {turn.turn}", turn.input_source, f"{turn.duration_ms:.0f} ms"]
    if turn.usage.total_tokens:
        head.append(f"{turn.usage.total_tokens} tokens")
    if turn.cost_usd is not None:
        head.append(usd(turn.cost_usd))
    if turn.steps > 1:
        head.append(f"{turn.steps} agent calls")
    if turn.retries:
        head.append(f"{turn.retries} retried request(s)")
    if turn.truncated:
        head.append("reply cut at the token limit")
    out = [f'<div class="turn"><div class="turn-head">{escape(" · ".join(head))}</div>']
    out.append(f'<div class="who">User</div><pre class="input">{escape(_clip(_text(turn.input)))}</pre>')
    if turn.simulator_reasoning:
        out.append(f'<div class="who">Simulator reasoning</div><pre>{escape(_clip(turn.simulator_reasoning))}</pre>')
    for call in turn.tool_calls:
        mocked = " (mocked)" if call.mocked else ""
        out.append(
            f'<div class="tool"><div class="who">Tool call <code>{escape(call.name)}</code>{mocked}'
            f"{' id ' + escape(call.id) if call.id else ''}</div>"
            f'<div class="label">arguments</div><pre class="tool-args">{escape(_clip(pretty_json(call.args)))}</pre>'
            f'<div class="label">result</div><pre class="tool-result">{escape(_clip(pretty_json(call.result)))}</pre></div>'
        )
    out.append(f'<div class="who">Agent</div><pre class="output">{escape(_clip(turn.output))}</pre>')
    if turn.awaiting_input:
        hint = f": {turn.input_hint}" if turn.input_hint else ""
        out.append(f'<p class="muted">Awaiting input ({escape(turn.awaiting_reason)}){escape(hint)}</p>')
    if turn.note:
        out.append(f'<p class="note">{escape(turn.note)}</p>')
    if turn.error:
        out.append(f'<p class="problem">{escape(_clip(turn.error))}</p>')
    if turn.assertions:
        out.append(_checks(turn.assertions))
    out.append("</div>")
    return "".join(out)


def _checks(assertions: list[AssertionResult]) -> str:
    return '<ul class="checks">' + "".join(_check(a) for a in assertions) + "</ul>"


def _check(assertion: AssertionResult) -> str:
    kind = ("not " if assertion.negate else "") + assertion.type
    parts = [f"<code>{escape(kind)}</code>"]
    if assertion.expected is not None:
        parts.append(f"expected <code>{escape(_clip(_text(assertion.expected), 500))}</code>")
    if not assertion.passed and assertion.actual is not None:
        parts.append(f"got <code>{escape(_clip(_text(assertion.actual), 500))}</code>")
    if assertion.message:
        parts.append(f"— {escape(_clip(assertion.message))}")
    if assertion.score is not None:
        parts.append(f'<span class="muted">(score {assertion.score:g})</span>')
    if assertion.reason:
        parts.append(f'<span class="muted">{escape(_clip(assertion.reason))}</span>')
    if assertion.diff:
        parts.append(_diff(assertion.diff))
    css = "ok" if assertion.passed else "bad"
    return f'<li class="{css}">{" ".join(parts)}</li>'


def _diff(diff: str) -> str:
    """A golden assertion's unified diff, its removed and added lines marked."""
    lines = []
    for line in diff.splitlines():
        kind = (
            "del"
            if line.startswith("-") and not line.startswith("---")
            else "ins"
            if line.startswith("+") and not line.startswith("+++")
            else ""
        )
        lines.append(f'<span class="{kind}">{escape(line)}</span>' if kind else escape(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _checkpoint(checkpoint: CheckpointResult) -> str:
    if checkpoint.reached:
        css, state = "ok", f"reached at turn {checkpoint.reached_at_turn}"
    else:
        css, state = ("bad", "not reached") if checkpoint.required else ("opt", "not reached (optional)")
    text = f"<code>{escape(checkpoint.id)}</code> {escape(state)}"
    if checkpoint.description:
        text += f' <span class="muted">— {escape(_clip(checkpoint.description))}</span>'
    if checkpoint.assertion is not None and not checkpoint.reached and checkpoint.assertion.message:
        text += f" — {escape(_clip(checkpoint.assertion.message))}"
    return f'<li class="{css}">{text}</li>'


def _text(value: Any) -> str:
    if value is None:
        return ""
    return pretty_json(value)


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return clip(text, limit, MORE_CHARACTERS, within=False)


def for_run(
    path: str | os.PathLike[str], run_id: str, info: dict[str, Any], gate: Callable[[], RunGate | None] | None
) -> HTMLWriter:
    """``--html``'s writer (:data:`farm.writers.extra.EXTRA_WRITERS`)."""
    return HTMLWriter(path, run_id, gate=gate)
