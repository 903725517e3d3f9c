"""Where results go: JSONL as cases finish, Parquet tables per run, and ``run.json``.

:class:`JSONLWriter` and :class:`ParquetWriter` implement one interface,
:class:`ResultWriter`; :class:`MultiWriter` feeds several at once.
"""

from farm.writers.base import MultiWriter, ResultWriter
from farm.writers.jsonl import JSONLWriter, finished_keys, read_jsonl_results
from farm.writers.parquet import (
    ASSERTIONS_SCHEMA,
    CASES_SCHEMA,
    TURNS_SCHEMA,
    ParquetWriter,
    consolidate,
    rows_from_result,
)
from farm.writers.runinfo import RUN_JSON, RunInfo, read_run_json, write_run_json

__all__ = [
    "ASSERTIONS_SCHEMA",
    "CASES_SCHEMA",
    "RUN_JSON",
    "TURNS_SCHEMA",
    "JSONLWriter",
    "MultiWriter",
    "ParquetWriter",
    "ResultWriter",
    "RunInfo",
    "consolidate",
    "finished_keys",
    "read_jsonl_results",
    "read_run_json",
    "rows_from_result",
    "write_run_json",
]
