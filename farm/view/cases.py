"""A run's cases as ``farm view`` lists them: filtered, searched, sorted and paged on the server.

The listing columns of a run's cases table are read once and kept (a few recent runs, until
their files change): 100,000 case runs are a few tens of MB of Arrow, and a filter, a sort and
a page over them take milliseconds. A text search also reads the inputs and replies of
``turns.parquet``, a row group at a time so that they are never all held; its matches are kept
for the next pages of the same search.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from farm.results import RunRecord

__all__ = ["CaseQuery", "RunCases"]

LISTED = [
    "run_index", "attempt", "suite", "case_id", "name", "status", "agent", "tags", "total_turns", "duration_ms",
    "cost_usd", "error", "started_at", "stopped", "error_role",
]  # fmt: skip
"""The columns a run's listing reads; ``suite`` is the reader's, and pairs the run's cases with another's;
``stopped`` (under adaptive repeats, on a case's last try) makes its comparison count its unbiased estimate;
``error_role`` leaves a try a role broke out of it."""
SORTABLE = {"case_id", "name", "status", "agent", "total_turns", "duration_ms", "cost_usd", "started_at", "run_index"}
MAX_PAGE = 500
_SEP = "\x1f"


@dataclass(frozen=True)
class CaseQuery:
    """What the run page asks for: filters, the order and the page."""

    status: tuple[str, ...] = ()
    """Only these statuses (none: all)."""
    tag: str | None = None
    agent: str | None = None
    text: str | None = None
    """Case-insensitive, over ids, names, inputs and replies."""
    sort: str = "case_id"
    descending: bool = False
    offset: int = 0
    limit: int = 50


@dataclass
class _Loaded:
    signature: Any
    table: pa.Table
    """The listing columns, in the order of the files."""
    order: pa.Array
    """The rows' positions in case id order (then agent, repetition): the default listing."""
    facets: dict[str, Any]
    tag_text: pa.ChunkedArray | None = None
    """The tags of each row as one string, each between separators (made on the first tag filter)."""

    def tagged(self, tag: str) -> pa.ChunkedArray:
        """Whether each row carries ``tag``: one substring match over ``tag_text``."""
        if self.tag_text is None:
            tags = pc.fill_null(pc.binary_join(self.table["tags"], _SEP), "")
            self.tag_text = pc.binary_join_element_wise(_SEP, tags, _SEP, "")
        return pc.match_substring(self.tag_text, f"{_SEP}{tag}{_SEP}")


class RunCases:
    """The case listings of runs, each run's table kept while its files stay as they were."""

    def __init__(self, keep_runs: int = 3, keep_searches: int = 16):
        self._keep_runs = keep_runs
        self._keep_searches = keep_searches
        self._runs: OrderedDict[str, _Loaded] = OrderedDict()
        self._searches: OrderedDict[tuple[str, Any, str], pa.Array] = OrderedDict()
        self._lock = threading.Lock()

    def table(self, run: RunRecord) -> _Loaded:
        """The run's listing table, read once per change of its files."""
        signature = run.signature()
        with self._lock:
            loaded = self._runs.get(run.name)
            if loaded and loaded.signature == signature:
                self._runs.move_to_end(run.name)
                return loaded
        table = run.cases(LISTED)
        # positions, not a sorted copy: a page takes its 50 rows, and memory holds the table once
        order = pc.sort_indices(
            table,
            sort_keys=[("case_id", "ascending"), ("suite", "ascending"), ("agent", "ascending"), ("run_index", "ascending")],
        )
        loaded = _Loaded(signature, table, order, _facets(table))
        with self._lock:
            self._runs[run.name] = loaded
            while len(self._runs) > self._keep_runs:
                self._runs.popitem(last=False)
        return loaded

    def page(self, run: RunRecord, query: CaseQuery) -> dict[str, Any]:
        """One page of ``run``'s cases that match ``query``, with how many match in all."""
        loaded = self.table(run)
        table = loaded.table
        mask = None
        if query.status:
            mask = _and(mask, pc.is_in(table["status"], value_set=pa.array(list(query.status), pa.string())))
        if query.agent:
            mask = _and(mask, pc.equal(table["agent"], query.agent))
        if query.tag:
            mask = _and(mask, loaded.tagged(query.tag))
        if query.text:
            mask = _and(mask, self._search(run, loaded, query.text))
        limit = max(1, min(query.limit, MAX_PAGE))
        offset = max(0, query.offset)
        if query.sort in SORTABLE and query.sort != "case_id" or query.descending:
            direction = "descending" if query.descending else "ascending"
            key = query.sort if query.sort in SORTABLE else "case_id"
            chosen = table.filter(mask) if mask is not None else table
            positions = pc.sort_indices(chosen.select([key, "case_id"]), sort_keys=[(key, direction), ("case_id", direction)])
        else:
            chosen = table
            positions = loaded.order if mask is None else pc.filter(loaded.order, pc.take(mask, loaded.order))
        total = len(positions)
        rows = chosen.take(positions.slice(offset, limit)).to_pylist()
        for row in rows:
            started = row.pop("started_at")
            row["started_at"] = started.timestamp() if started is not None else None
        return {"total": total, "offset": offset, "limit": limit, "rows": rows, "facets": loaded.facets}

    def _search(self, run: RunRecord, loaded: _Loaded, text: str) -> pa.Array:
        """Which rows of the run's table match ``text`` in id, name, an input or a reply."""
        needle = text.strip()
        marker = (run.name, loaded.signature, needle.casefold())
        with self._lock:
            kept = self._searches.get(marker)
            if kept is not None:
                self._searches.move_to_end(marker)
                return kept
        table = loaded.table
        mask = pc.or_(
            pc.match_substring(table["case_id"], needle, ignore_case=True),
            pc.fill_null(pc.match_substring(table["name"], needle, ignore_case=True), False),
        )
        keys = _turn_matches(run, needle)
        if len(keys):
            mask = pc.or_(mask, pc.is_in(_keys(table), value_set=keys))
        with self._lock:
            self._searches[marker] = mask
            while len(self._searches) > self._keep_searches:
                self._searches.popitem(last=False)
        return mask


def _turn_matches(run: RunRecord, needle: str) -> pa.Array:
    """Keys of the case runs with a turn whose input or reply holds ``needle`` (case-insensitive)."""
    found = []
    for batch in run.batches("turns", ["agent", "run_index", "attempt", "suite", "case_id", "input", "output"]):
        hit = pc.or_(
            pc.fill_null(pc.match_substring(batch["input"], needle, ignore_case=True), False),
            pc.fill_null(pc.match_substring(batch["output"], needle, ignore_case=True), False),
        )
        if pc.any(hit).as_py():
            found.append(_keys(batch.filter(hit)))
    if not found:
        return pa.array([], pa.string())
    return pc.unique(pa.chunked_array([chunk for keys in found for chunk in keys.chunks]).combine_chunks())


def _keys(table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """One string per case run of the run: agent, suite, case id, repetition and attempt."""
    return pc.binary_join_element_wise(
        pc.fill_null(table["agent"], ""), pc.fill_null(table["suite"], ""), table["case_id"], pc.cast(table["run_index"], pa.string()),
        pc.cast(table["attempt"], pa.string()), _SEP,
    )  # fmt: skip


def _and(mask: Any, more: Any) -> Any:
    return more if mask is None else pc.and_(mask, more)


def _facets(table: pa.Table) -> dict[str, Any]:
    """What the filters offer: the statuses, agents and tags of the run, with counts; and its suites,
    as a run of more than one lists each case's suite (an id may repeat across them)."""

    def counted(column: pa.Array | pa.ChunkedArray) -> list[dict[str, Any]]:
        if len(column) == 0:
            return []
        values = pc.value_counts(column)
        pairs = zip(values.field("values").to_pylist(), values.field("counts").to_pylist(), strict=True)
        return [{"value": value, "count": count} for value, count in sorted(pairs, key=lambda p: (-p[1], str(p[0]))) if value]

    return {
        "status": counted(table["status"]),
        "agent": counted(table["agent"]),
        "suite": counted(table["suite"]),
        "tag": counted(pc.list_flatten(table["tags"]))[:200],
        "total": table.num_rows,
    }
