"""``farm agents``: the configured agents and connectors, keys redacted."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from farm.cli.options import ConfigPath
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from farm.config import Connector

__all__ = ["agents"]


def agents(config: ConfigPath = None) -> None:
    """List configured agents and connectors (API keys are never shown)."""
    from farm.cli.app import fail

    from farm.config import find_config, load_config
    from farm.errors import FarmError

    try:
        cfg = load_config(find_config(config))
    except FarmError as exc:
        fail(exc)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)  # piped: don't wrap cells
    console.print(f"Config: {cfg.path or '(none found: built-in defaults)'}")
    table = Table(title="Agents")
    for column in ("id", "kind", "connector", "description"):
        table.add_column(column)
    for agent_id, agent in sorted(cfg.agents.items()):
        where = agent.connector or agent.entry or agent.url or agent.uses or ""
        table.add_row(agent_id, agent.kind, where, agent.description or "")
    console.print(table)
    table = Table(title="Connectors")
    for column in ("name", "base_url", "model", "api key", "rpm", "tpm", "max_concurrency", "timeout", "price (USD / M tokens)"):
        table.add_column(column)
    for name, conn in sorted(cfg.connectors.items()):
        safe = conn.redacted()
        table.add_row(
            name, safe["base_url"], conn.model or "", safe["api_key"] or "-", str(conn.rpm or "-"), str(conn.tpm or "-"),
            str(conn.max_concurrency or "-"), f"{conn.timeout:g}s", _price(conn),
        )  # fmt: skip
    console.print(table)


def _price(connector: Connector) -> str:
    """``in 2.5, out 10`` (and ``cached 1.25``), or ``-`` when the connector has no price."""
    price = connector.price
    if price is None:
        return "-"
    cached = "" if price.cached_input is None else f", cached {price.cached_input:g}"
    return f"in {price.input:g}, out {price.output:g}{cached}"
