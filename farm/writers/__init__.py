"""Where results go: JSONL as cases finish, Parquet tables per run, and ``run.json``.

:class:`JSONLWriter` and :class:`ParquetWriter` implement one interface,
:class:`ResultWriter`; :class:`MultiWriter` feeds several at once.

Each name is imported from its module when first used, so that importing one writer (or
``run.json``'s model) loads no other; pyarrow in particular is loaded only when a table is
built (:mod:`farm.writers.parquet`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from farm.writers.base import MultiWriter, ResultWriter
    from farm.writers.jsonl import JSONLWriter, read_jsonl_results
    from farm.writers.parquet import (
        ASSERTIONS_SCHEMA,
        CASES_SCHEMA,
        SPANS_SCHEMA,
        TURNS_SCHEMA,
        ParquetWriter,
        consolidate,
        rows_from_result,
    )
    from farm.writers.runinfo import RUN_JSON, RunInfo, read_run_json, write_run_json

_MODULE_OF = {
    "MultiWriter": "base",
    "ResultWriter": "base",
    "JSONLWriter": "jsonl",
    "read_jsonl_results": "jsonl",
    "ASSERTIONS_SCHEMA": "parquet",
    "CASES_SCHEMA": "parquet",
    "SPANS_SCHEMA": "parquet",
    "TURNS_SCHEMA": "parquet",
    "ParquetWriter": "parquet",
    "consolidate": "parquet",
    "rows_from_result": "parquet",
    "RUN_JSON": "runinfo",
    "RunInfo": "runinfo",
    "read_run_json": "runinfo",
    "write_run_json": "runinfo",
}

__all__ = [
    "ASSERTIONS_SCHEMA",
    "CASES_SCHEMA",
    "SPANS_SCHEMA",
    "RUN_JSON",
    "TURNS_SCHEMA",
    "JSONLWriter",
    "MultiWriter",
    "ParquetWriter",
    "ResultWriter",
    "RunInfo",
    "consolidate",
    "read_jsonl_results",
    "read_run_json",
    "rows_from_result",
    "write_run_json",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
