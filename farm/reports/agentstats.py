"""``farm report``'s statistics per agent under test, and its paired comparisons.

From the cases table (one row per case run, flagged ``is_pass``/``is_fail``
by :mod:`farm.reports.analysis`), per run and agent:

- the pass rate over the judged tries with a 95 % interval: Wilson's, or with
  ``--runs`` the case-clustered one (:func:`~farm.reports.stats.clustered_interval`);
- with k tries or more per case, k being the run's ``--runs`` (``run.json``;
  for a results file without it, the most tries any case has): pass@k and
  pass^k, the means over those cases of the unbiased per-case estimators;
- the flaky cases (passed some tries, not others), each with its own interval;
- what the agent and its cases' role calls cost.

Case runs a role failed (``error_role`` set: a dead simulator, a judge that
answered no JSON) are neither passes nor failures of the agent: they are left
out of every figure here and counted (``role_errors``).

Paired comparisons (:func:`paired_comparisons`): every two agents of one run,
and the last two runs read (one agent each: those two; else each agent both
tested), on the cases both sides judged, a case paired only with the same case
(:data:`~farm.results.CASE_KEY`: its suite and id; two runs with none in common
are not compared):
:func:`~farm.reports.stats.paired_cases`, the gate's ``--baseline`` comparison: the
difference of the per-case pass fractions, or, where adaptive repeats stopped a case,
of each case's unbiased estimate under its run's stopping rule (the difference, its
interval, ``p_value``, the detectable difference). With
several comparisons in one report their p-values are Holm-adjusted
(``p_adjusted``), and the adjusted value decides.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from farm.reports.models import AgentStats, CaseDelta, CaseStats, PairedComparison
from farm.reports.stats import (
    SIGNIFICANCE,
    CaseResult,
    PairedDifference,
    clustered_interval,
    difference_sentence,
    holm,
    paired_cases,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)
from farm.results import CASE_KEY

if TYPE_CHECKING:
    from farm.sequential import Sequential

__all__ = ["agent_stats", "paired_comparisons", "statistics"]

Side = tuple[str, str]
"""One agent in one run: ``(run_id, agent)``."""

_KEY = list(CASE_KEY)
"""A case across runs: its suite and id."""


def statistics(
    flagged: pa.Table,
    runs_of: dict[str, int | None],
    run_order: list[str],
    cut: int | None,
    rules: dict[str, Sequential | None] | None = None,
) -> tuple[list[AgentStats], list[PairedComparison]]:
    """:func:`agent_stats` and :func:`paired_comparisons` of ``flagged``, its cases tallied once;
    ``rules``: each run's stopping rule under adaptive repeats (:meth:`~farm.sequential.Sequential.of_run`)."""
    sides = _sides(flagged)
    return agent_stats(flagged, sides, runs_of, run_order, cut), paired_comparisons(sides, run_order, cut, rules or {})


def _sides(flagged: pa.Table) -> dict[Side, pa.Table]:
    """Per run and agent: one row per case it judged (``suite``, ``case_id``, ``name``, ``passes``,
    ``tries``, ``stopped``: under adaptive repeats, why it stopped, as its last try says). Columns all
    the way: 100k cases tally in a fraction of a second."""
    grouped = flagged.group_by(["run_id", "agent", *_KEY]).aggregate(
        [("is_pass", "sum"), ("is_fail", "sum"), ("name", "max"), ("stopped", "max")]
    )
    passes = pc.fill_null(grouped["is_pass_sum"], 0)
    tries = pc.add(passes, pc.fill_null(grouped["is_fail_sum"], 0))
    table = pa.table(
        {
            "run_id": grouped["run_id"], "agent": grouped["agent"], "suite": grouped["suite"],
            "case_id": grouped["case_id"], "name": grouped["name_max"], "passes": passes, "tries": tries,
            "stopped": grouped["stopped_max"],
        }
    ).filter(pc.greater(tries, 0))  # fmt: skip
    out = {}
    for side in table.group_by(["run_id", "agent"]).aggregate([]).to_pylist():
        mask = pc.and_(pc.equal(table["run_id"], side["run_id"]), pc.equal(table["agent"], side["agent"]))
        out[(side["run_id"], side["agent"])] = table.filter(mask).drop_columns(["run_id", "agent"])
    return out


def _costs(flagged: pa.Table) -> dict[Side, tuple[float | None, float | None, int, int]]:
    """Per run and agent: its cost, its roles' cost, its case runs and how many of them a role failed."""
    grouped = flagged.group_by(["run_id", "agent"]).aggregate(
        [("cost_usd", "sum"), ("role_cost_usd", "sum"), ([], "count_all"), ("is_role_error", "sum")]
    )
    return {
        (row["run_id"], row["agent"]): (
            row["cost_usd_sum"], row["role_cost_usd_sum"], row["count_all"], row["is_role_error_sum"] or 0
        )
        for row in grouped.to_pylist()
    }  # fmt: skip


def agent_stats(
    flagged: pa.Table, sides: dict[Side, pa.Table], runs_of: dict[str, int | None], run_order: list[str], cut: int | None
) -> list[AgentStats]:
    """Per run (in ``run_order``) and agent (by name): see the module docstring. ``sides``: each run and
    agent's cases (:func:`_sides`); ``runs_of``: each run's ``--runs`` from its ``run.json`` (None when
    unknown); ``cut``: flaky cases listed at most."""
    costs = _costs(flagged)
    order = {run_id: index for index, run_id in enumerate(run_order)}
    keys = sorted(set(sides) | set(costs), key=lambda side: (order.get(side[0], len(order)), side[0], side[1]))
    out = []
    for side in keys:
        cases = sides.get(side)
        cost, role_cost, case_runs, role_errors = costs.get(side, (None, None, 0, 0))
        passes_list: list[int] = [] if cases is None else cases["passes"].to_pylist()
        tries_list: list[int] = [] if cases is None else cases["tries"].to_pylist()
        tries, passes = sum(tries_list), sum(passes_list)
        most = max(tries_list, default=1)
        repeated = most > 1
        declared = runs_of.get(side[0]) or most
        k = declared if declared >= 2 else None
        at_k = [(n, c) for n, c in zip(tries_list, passes_list, strict=True) if k is not None and n >= k]
        flaky, flaky_total = _flaky(cases, side[1], k, cut) if cases is not None else ([], 0)
        out.append(
            AgentStats(
                run_id=side[0],
                agent=side[1],
                cases=len(tries_list),
                tries=tries,
                passes=passes,
                pass_rate=passes / tries if tries else None,
                interval=clustered_interval(list(zip(passes_list, tries_list, strict=True)))
                if repeated
                else wilson_interval(passes, tries),
                interval_method="wilson-clustered" if repeated else "wilson",
                k=k,
                k_cases=len(at_k),
                pass_at_k=_mean([pass_at_k(n, c, k) for n, c in at_k]) if k else None,
                pass_hat_k=_mean([pass_hat_k(n, c, k) for n, c in at_k]) if k else None,
                cost_usd=cost,
                role_cost_usd=role_cost,
                cost_per_case_usd=cost / case_runs if cost is not None and case_runs else None,
                role_errors=role_errors,
                flaky_total=flaky_total,
                flaky=flaky,
            )
        )
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _flaky(cases: pa.Table, agent: str, k: int | None, cut: int | None) -> tuple[list[CaseStats], int]:
    """The cases that passed some tries and not others, lowest pass rate first (at most ``cut``), and their count."""
    flaky = cases.filter(pc.and_(pc.greater(cases["passes"], 0), pc.less(cases["passes"], cases["tries"])))
    flaky = flaky.append_column("rate", pc.divide(pc.cast(flaky["passes"], pa.float64()), flaky["tries"]))
    flaky = flaky.sort_by([("rate", "ascending"), ("case_id", "ascending"), ("suite", "ascending")])
    rows = (flaky.slice(0, cut) if cut else flaky).to_pylist()
    return [_case_stats(row, agent, k) for row in rows], flaky.num_rows


def _case_stats(row: dict[str, Any], agent: str, k: int | None) -> CaseStats:
    n, c = row["tries"], row["passes"]
    counted = k is not None and n >= k
    return CaseStats(
        case_id=row["case_id"],
        suite=row["suite"],
        name=row["name"],
        agent=agent,
        tries=n,
        passes=c,
        pass_rate=c / n,
        interval=wilson_interval(c, n),
        pass_at_k=pass_at_k(n, c, k) if counted and k else None,
        pass_hat_k=pass_hat_k(n, c, k) if counted and k else None,
    )


def paired_comparisons(
    sides: dict[Side, pa.Table], run_order: list[str], cut: int | None, rules: dict[str, Sequential | None] | None = None
) -> list[PairedComparison]:
    """Every two agents of each run, then the last two runs of ``run_order`` (see the module docstring),
    their p-values Holm-adjusted together when there are several; ``rules``: each run's stopping rule
    under adaptive repeats (a run not in it: ``--runs N``)."""
    rules = rules or {}
    out: list[tuple[PairedComparison, PairedDifference]] = []
    for run_id in run_order:
        agents = sorted(agent for run, agent in sides if run == run_id)
        for a, b in combinations(agents, 2):  # with several runs read, each name says which run
            name_a, name_b = (f"{run_id} ({a})", f"{run_id} ({b})") if len(run_order) > 1 else (a, b)
            out.append(_compare("agents", (run_id, a), (run_id, b), name_a, name_b, sides, cut, rules))
    if len(run_order) >= 2:
        old, new = run_order[-2], run_order[-1]
        old_agents = sorted(agent for run, agent in sides if run == old)
        new_agents = sorted(agent for run, agent in sides if run == new)
        if len(old_agents) == 1 and len(new_agents) == 1:
            pairs = [(old_agents[0], new_agents[0])]
        else:
            pairs = [(agent, agent) for agent in old_agents if agent in new_agents]
        for a, b in pairs:  # each side names its agent unless the runs tested the same one agent
            name_a, name_b = (old, new) if a == b and len(pairs) == 1 else (f"{old} ({a})", f"{new} ({b})")
            compared = _compare("runs", (old, a), (new, b), name_a, name_b, sides, cut, rules)
            if compared[0].cases:  # runs with no case judged in common: the report says so, and no figure
                out.append(compared)
    return _adjusted(out)


def _adjusted(comparisons: list[tuple[PairedComparison, PairedDifference]]) -> list[PairedComparison]:
    """The comparisons with their Holm-adjusted p-values, significance and sentences."""
    several = len(comparisons) > 1
    adjusted = holm([difference.p_value for _, difference in comparisons])
    return [
        comparison.model_copy(
            update={
                "p_adjusted": p,
                "significant": p < SIGNIFICANCE,
                "sentence": difference_sentence(comparison.a, comparison.b, difference, p=p, adjusted=several),
            }
        )
        for (comparison, difference), p in zip(comparisons, adjusted, strict=True)
    ]


def _compare(
    kind: Literal["agents", "runs"],
    a: Side,
    b: Side,
    name_a: str,
    name_b: str,
    sides: dict[Side, pa.Table],
    cut: int | None,
    rules: dict[str, Sequential | None],
) -> tuple[PairedComparison, PairedDifference]:
    """A against B on the cases both judged, before the p-values of the report are adjusted together."""
    left = sides[a].rename_columns(["suite", "case_id", "a_name", "a_passes", "a_tries", "a_stopped"])
    right = sides[b].rename_columns(["suite", "case_id", "b_name", "b_passes", "b_tries", "b_stopped"])
    rows = left.join(right, keys=_KEY, join_type="inner").to_pylist()  # the same case only: its suite and id
    for row in rows:
        for side, run_id in (("a", a[0]), ("b", b[0])):
            row[side] = CaseResult.of(row[f"{side}_passes"], row[f"{side}_tries"], row[f"{side}_stopped"], rules.get(run_id))
    paired = paired_cases([(row["a"], row["b"]) for row in rows])
    better = [row for row in rows if row["b"].better_than(row["a"])]
    worse = [row for row in rows if row["a"].better_than(row["b"])]

    def deltas(chosen: list[dict[str, Any]]) -> list[CaseDelta]:
        chosen = sorted(chosen, key=lambda row: (row["case_id"], row["suite"]))
        return [
            CaseDelta(
                case_id=row["case_id"],
                suite=row["suite"],
                name=row["b_name"] or row["a_name"],
                a_passes=row["a_passes"],
                a_tries=row["a_tries"],
                b_passes=row["b_passes"],
                b_tries=row["b_tries"],
                a_estimate=row["a"].estimate,
                b_estimate=row["b"].estimate,
            )  # fmt: skip
            for row in (chosen[:cut] if cut else chosen)
        ]

    comparison = PairedComparison(
        kind=kind,
        a=name_a,
        b=name_b,
        a_run=a[0],
        b_run=b[0],
        a_agent=a[1],
        b_agent=b[1],
        cases=len(rows),
        b_better=len(better),
        b_worse=len(worse),
        same=len(rows) - len(better) - len(worse),
        difference=paired.difference,
        difference_interval=paired.interval,
        test=paired.test,
        p_value=paired.p_value,
        p_adjusted=paired.p_value,
        significant=paired.significant,
        detectable_difference=paired.detectable_difference,
        sentence=difference_sentence(name_a, name_b, paired),
        better=deltas(better),
        worse=deltas(worse),
    )
    return comparison, paired
