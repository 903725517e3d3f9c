"""What a generator is asked: the query of ``-i agents:<gen>?k=v`` (or ``scripts:``) merged over
the generator's ``generate`` settings, checked (:func:`check_query`) and read as
:class:`Settings`: how many cases, in batches of how many, the patience, the seed, and the
coverage lists whose cross product the cases are spread over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.errors import UsageError
from farm.wording import nearest, shown

__all__ = ["DEFAULT_BATCH", "DEFAULT_PATIENCE", "DEFAULT_SEED", "DOCUMENTED", "Settings", "as_list", "check_query"]

DEFAULT_BATCH = 20
"""Cases asked per generator call. About 20: an LLM's reply of 20 cases (~3-4k tokens) fits the
output limit of common models without being cut off, a malformed or failed reply loses little,
and the first cases arrive after one short call; far fewer would pay the prompt (and its
"avoid" list) over and over for few cases."""

DEFAULT_PATIENCE = 5
"""Batches in a row that add no new valid case before generation stops."""

DEFAULT_SEED = 0
"""The ``seed`` every request carries unless the query or the generator's settings give one."""

SETTINGS = ("count", "batch", "patience", "seed")
"""Query keys that steer generation and are not coverage lists."""

DOCUMENTED = frozenset({*SETTINGS, "focus", "complexity"})
"""Parameters every generator is told of (docs/generation.md), besides the settings."""


def as_list(value: Any) -> list[Any] | None:
    """A coverage list: a list, or text with commas (``refunds,travel``)."""
    if isinstance(value, list):
        return value
    if isinstance(value, str) and "," in value:
        return [part.strip() for part in value.split(",") if part.strip()]
    return None


def check_query(where: str, query: dict[str, Any], known: set[str], strict: bool) -> None:
    """Raise :class:`UsageError` for a parameter the generator does not know; ``where`` names
    where it was given (``-i agents:gen``).

    ``known``: what it reads besides :data:`DOCUMENTED` (its ``generate`` table, its prompt's
    placeholders). A name close to a known one is a typo, always; with ``strict`` (the farm writes
    the generator's prompt, so nothing else reaches the model) any other name that is no coverage
    list is unknown too."""
    names = known | DOCUMENTED
    for key, value in query.items():
        if key in names:
            continue
        hint = nearest(key, names)
        if hint:
            raise UsageError(f"{where}: unknown parameter '{shown(key)}'{hint}")
        if strict and as_list(value) is None:
            raise UsageError(
                f"{where}: unknown parameter '{shown(key)}': the generator's prompt has no {{{shown(key)}}}"
                f" and it is no coverage list (known: {', '.join(sorted(names))})"
            )


def _int_setting(name: str, value: Any, origin: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"-i {origin}: '{name}' must be a whole number of at least {least}, not {value!r}")
    return value


@dataclass(frozen=True)
class Settings:
    """How one generation goes, read from its parameters once."""

    asked: int
    """Cases to generate (``count``)."""
    batch: int
    """Cases asked per generator call."""
    patience: int
    """Batches in a row that add nothing new before generation stops."""
    seed: Any
    coverage: dict[str, list[Any]]
    """The coverage lists (``focus=refunds,travel``): the cases are spread over their cross product."""
    metadata: dict[str, Any]
    """What every request carries (the coverage lists aside, each request naming its slice of them)."""

    @classmethod
    def of(cls, origin: str, params: dict[str, Any], metadata: dict[str, Any]) -> Settings:
        """``params`` (the typed query over the generator's settings) and ``metadata``
        (:func:`farm.generation.sources.generator_metadata`) read for the generator ``origin`` names."""
        asked = _int_setting("count", params.get("count", metadata.get("count", 5)), origin, 1)
        batch = _int_setting("batch", params.get("batch", DEFAULT_BATCH), origin, 1)
        patience = _int_setting("patience", params.get("patience", DEFAULT_PATIENCE), origin, 1)
        seed = params.get("seed", DEFAULT_SEED)
        coverage = {k: v for k, v in params.items() if k not in SETTINGS and as_list(v)}
        told = {k: v for k, v in metadata.items() if k not in coverage and k not in ("batch", "patience")}
        told.update(count=asked, seed=seed)
        return cls(asked, batch, patience, seed, {k: as_list(v) or [] for k, v in coverage.items()}, told)
