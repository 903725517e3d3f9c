"""The columns ``farm view`` reads, with their types: the run tables' own schemas, plus the
columns newer farms add (a run written before them reads them as nulls)."""

from __future__ import annotations

import re

import pyarrow as pa

from farm.writers import ASSERTIONS_SCHEMA, CASES_SCHEMA, TURNS_SCHEMA

__all__ = ["ASSERTIONS", "CASES", "TURNS", "suite_of"]

_NEWER = {"cost_usd": pa.float64(), "role_cost_usd": pa.float64()}


def _with_newer(schema: pa.Schema) -> pa.Schema:
    for name, kind in _NEWER.items():
        if name not in schema.names:
            schema = schema.append(pa.field(name, kind))
    return schema


CASES = _with_newer(CASES_SCHEMA)
TURNS = _with_newer(TURNS_SCHEMA)
ASSERTIONS = ASSERTIONS_SCHEMA

_LINE = re.compile(r":\d+$")


def suite_of(source: str) -> str:
    """The suite a case came from: its ``source`` (``file:line``) without the line."""
    return _LINE.sub("", source)
