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

Paired comparisons (:func:`paired_comparisons`): every two agents of one run,
and the last two runs read (one agent each: those two; else each agent both
tested), on the cases both sides judged. Per case, B is better when its pass
rate is higher; the exact McNemar test on the better and worse counts (with
repeated tries, the same binomial test as a sign test on the per-case pass
rates) gives ``p_value``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import pyarrow as pa

from farm.reports.models import AgentStats, CaseDelta, CaseStats, PairedComparison
from farm.reports.stats import (
    clustered_interval,
    comparison_sentence,
    mcnemar_exact,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)

__all__ = ["agent_stats", "paired_comparisons"]

CaseKey = tuple[str, str]
"""A case across runs: its suite and id."""
Side = tuple[str, str]
"""One agent in one run: ``(run_id, agent)``."""


@dataclass(slots=True)
class _Tally:
    name: str | None
    passes: int = 0
    tries: int = 0

    @property
    def rate(self) -> float:
        return self.passes / self.tries


def _tallies(flagged: pa.Table) -> dict[Side, dict[CaseKey, _Tally]]:
    """Per run and agent, per case: judged tries and passes (cases never judged left out)."""
    grouped = flagged.group_by(["run_id", "agent", "suite", "case_id"]).aggregate(
        [("is_pass", "sum"), ("is_fail", "sum"), ("name", "max")]
    )
    out: dict[Side, dict[CaseKey, _Tally]] = {}
    for row in grouped.to_pylist():
        passes, fails = row["is_pass_sum"] or 0, row["is_fail_sum"] or 0
        if passes + fails == 0:
            continue
        side = out.setdefault((row["run_id"], row["agent"]), {})
        side[(row["suite"], row["case_id"])] = _Tally(row["name_max"], passes, passes + fails)
    return out


def _costs(flagged: pa.Table) -> dict[Side, tuple[float | None, float | None, int]]:
    grouped = flagged.group_by(["run_id", "agent"]).aggregate(
        [("cost_usd", "sum"), ("role_cost_usd", "sum"), ([], "count_all")]
    )
    return {
        (row["run_id"], row["agent"]): (row["cost_usd_sum"], row["role_cost_usd_sum"], row["count_all"])
        for row in grouped.to_pylist()
    }


def agent_stats(flagged: pa.Table, runs_of: dict[str, int | None], run_order: list[str], cut: int | None) -> list[AgentStats]:
    """Per run (in ``run_order``) and agent (by name): see the module docstring. ``runs_of``: each
    run's ``--runs`` from its ``run.json`` (None when unknown); ``cut``: flaky cases listed at most."""
    by_side = _tallies(flagged)
    costs = _costs(flagged)
    order = {run_id: index for index, run_id in enumerate(run_order)}
    sides = sorted(set(by_side) | set(costs), key=lambda side: (order.get(side[0], len(order)), side[0], side[1]))
    out = []
    for side in sides:
        cases = by_side.get(side, {})
        cost, role_cost, case_runs = costs.get(side, (None, None, 0))
        tries = sum(t.tries for t in cases.values())
        passes = sum(t.passes for t in cases.values())
        repeated = any(t.tries > 1 for t in cases.values())
        per_case = [(t.passes, t.tries) for t in cases.values()]
        declared = runs_of.get(side[0]) or max((t.tries for t in cases.values()), default=1)
        k = declared if declared >= 2 else None
        at_k = [t for t in cases.values() if k is not None and t.tries >= k]
        flaky = sorted(
            ((key, t) for key, t in cases.items() if 0 < t.passes < t.tries),
            key=lambda item: (item[1].rate, item[0][1], item[0][0]),
        )
        out.append(
            AgentStats(
                run_id=side[0],
                agent=side[1],
                cases=len(cases),
                tries=tries,
                passes=passes,
                pass_rate=passes / tries if tries else None,
                interval=clustered_interval(per_case) if repeated else wilson_interval(passes, tries),
                interval_method="wilson-clustered" if repeated else "wilson",
                k=k,
                k_cases=len(at_k),
                pass_at_k=_mean([pass_at_k(t.tries, t.passes, k) for t in at_k]) if k else None,
                pass_hat_k=_mean([pass_hat_k(t.tries, t.passes, k) for t in at_k]) if k else None,
                cost_usd=cost,
                role_cost_usd=role_cost,
                cost_per_case_usd=cost / case_runs if cost is not None and case_runs else None,
                flaky_total=len(flaky),
                flaky=[_case_stats(key, t, side[1], k) for key, t in (flaky[:cut] if cut else flaky)],
            )
        )
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _case_stats(key: CaseKey, tally: _Tally, agent: str, k: int | None) -> CaseStats:
    counted = k is not None and tally.tries >= k
    return CaseStats(
        case_id=key[1],
        suite=key[0],
        name=tally.name,
        agent=agent,
        tries=tally.tries,
        passes=tally.passes,
        pass_rate=tally.rate,
        interval=wilson_interval(tally.passes, tally.tries),
        pass_at_k=pass_at_k(tally.tries, tally.passes, k) if counted and k else None,
        pass_hat_k=pass_hat_k(tally.tries, tally.passes, k) if counted and k else None,
    )


def paired_comparisons(flagged: pa.Table, run_order: list[str], cut: int | None) -> list[PairedComparison]:
    """Every two agents of each run, then the last two runs of ``run_order`` (see the module docstring)."""
    by_side = _tallies(flagged)
    out = []
    for run_id in run_order:
        agents = sorted(agent for run, agent in by_side if run == run_id)
        for a, b in combinations(agents, 2):
            out.append(_compare("agents", (run_id, a), (run_id, b), a, b, by_side, cut))
    if len(run_order) >= 2:
        old, new = run_order[-2], run_order[-1]
        old_agents = sorted(agent for run, agent in by_side if run == old)
        new_agents = sorted(agent for run, agent in by_side if run == new)
        if len(old_agents) == 1 and len(new_agents) == 1:
            pairs = [(old_agents[0], new_agents[0])]
        else:
            pairs = [(agent, agent) for agent in old_agents if agent in new_agents]
        for a, b in pairs:
            name_a, name_b = (old, new) if a == b else (f"{old} ({a})", f"{new} ({b})")
            out.append(_compare("runs", (old, a), (new, b), name_a, name_b, by_side, cut))
    return out


def _compare(
    kind: Literal["agents", "runs"], a: Side, b: Side, name_a: str, name_b: str, by_side: dict[Side, dict[CaseKey, _Tally]], cut: int | None
) -> PairedComparison:
    cases_a, cases_b = by_side.get(a, {}), by_side.get(b, {})
    both = sorted(set(cases_a) & set(cases_b), key=lambda key: (key[1], key[0]))
    better: list[CaseDelta] = []
    worse: list[CaseDelta] = []
    repeated = False
    for key in both:
        ta, tb = cases_a[key], cases_b[key]
        repeated = repeated or ta.tries > 1 or tb.tries > 1
        # cross-multiplied so that 2/3 and 4/6 are equal exactly
        difference = tb.passes * ta.tries - ta.passes * tb.tries
        if difference:
            delta = CaseDelta(
                case_id=key[1], suite=key[0], name=tb.name or ta.name,
                a_passes=ta.passes, a_tries=ta.tries, b_passes=tb.passes, b_tries=tb.tries,
            )  # fmt: skip
            (better if difference > 0 else worse).append(delta)
    p = mcnemar_exact(len(better), len(worse))
    return PairedComparison(
        kind=kind,
        a=name_a,
        b=name_b,
        a_run=a[0],
        b_run=b[0],
        a_agent=a[1],
        b_agent=b[1],
        cases=len(both),
        b_better=len(better),
        b_worse=len(worse),
        same=len(both) - len(better) - len(worse),
        p_value=p,
        sentence=comparison_sentence(name_a, name_b, len(worse), len(better), p, repeated=repeated),
        better=better[:cut] if cut else better,
        worse=worse[:cut] if cut else worse,
    )
