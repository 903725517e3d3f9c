"""The Arrow schema of a Parquet table, derived from its row model (:mod:`farm.writers.rows`).

A column's Arrow type follows from its field's annotation: ``str`` is ``string``, ``float``
``float64``, ``bool`` ``bool``, ``int`` ``int64`` unless it is ``Int16`` or ``Int32``,
``Timestamp`` is ``timestamp[ms, UTC]``, ``list[X]`` a list of X, a row model a struct, and
``X | None`` is X: every column may hold nulls.
"""

from __future__ import annotations

import types
from datetime import datetime
from typing import Annotated, Any, Union, get_args, get_origin

import pyarrow as pa

from farm.writers.rows import RowModel, StoredAs

__all__ = ["arrow_schema", "arrow_type", "type_name"]

_PLAIN_TYPES: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("ms", tz="UTC"),
}

_STORED: dict[str, pa.DataType] = {"int16": pa.int16(), "int32": pa.int32(), "timestamp[ms, UTC]": pa.timestamp("ms", tz="UTC")}
"""The Arrow type of each :class:`~farm.writers.rows.StoredAs` a row field may declare."""


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a row field annotated ``annotation`` (see the module docstring)."""
    if isinstance(annotation, type) and issubclass(annotation, RowModel):
        return pa.struct(_arrow_fields(annotation))
    origin = get_origin(annotation)
    if origin is Annotated:
        declared = [_STORED[meta] for meta in annotation.__metadata__ if isinstance(meta, StoredAs)]
        return declared[0] if declared else arrow_type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        (inner,) = [arg for arg in get_args(annotation) if arg is not type(None)]
        return arrow_type(inner)
    if origin is list:
        # "element" is the name Parquet gives list items, so a table read back equals its schema.
        return pa.list_(pa.field("element", arrow_type(get_args(annotation)[0])))
    if annotation in _PLAIN_TYPES:
        return _PLAIN_TYPES[annotation]
    raise TypeError(f"No Arrow type for a row field annotated {annotation!r}; see farm.writers.arrowschema.")


def arrow_schema(row: type[RowModel]) -> pa.Schema:
    """The Arrow schema of the table whose rows are ``row``: one nullable column per field, in order."""
    return pa.schema(_arrow_fields(row))


def type_name(data_type: pa.DataType) -> str:
    """``data_type`` as the docs name it: ``int32``, ``float64``, ``list<string>``, ``timestamp[ms, UTC]``."""
    if pa.types.is_list(data_type):
        return f"list<{type_name(data_type.value_type)}>"
    if pa.types.is_struct(data_type):
        return "struct<…>"
    if pa.types.is_timestamp(data_type):
        return f"timestamp[{data_type.unit}, {data_type.tz}]"
    if pa.types.is_floating(data_type):
        return f"float{data_type.bit_width}"
    return str(data_type)


def _arrow_fields(row: type[RowModel]) -> list[pa.Field]:
    fields = []
    for name, field in row.model_fields.items():
        # pydantic keeps the metadata of a field's outer Annotated apart from its annotation
        declared = [_STORED[meta] for meta in field.metadata if isinstance(meta, StoredAs)]
        fields.append(pa.field(name, declared[0] if declared else arrow_type(field.annotation)))
    return fields
