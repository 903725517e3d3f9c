"""Keeping secrets out of everything the farm writes or prints.

A :class:`Scrubber` knows a set of secrets — API keys read through
``api_key_env``, the values of secret-looking connector headers, passwords
and secret query values in a ``base_url`` — and replaces them with
:data:`MASK` wherever they show up, in these forms:

- the secret itself, in upper and lower case and reversed (an agent that shouts
  or turns back what it was sent), and its percent-encoded forms (``quote``,
  ``quote_plus``);
- its base64, standard and URL-safe, at each of the three byte alignments, so
  the key is found inside the base64 of a longer text too (``user:key`` of
  Basic auth, ``Bearer key``, a JSON blob);
- any piece of at least :data:`MIN_PIECE` characters of any of those forms,
  so an endpoint that echoes the key cut in two does not leak either half.

Pieces are found without scanning every window: every run of
:data:`MIN_PIECE` characters of a form holds one of the form's blocks of
``MIN_PIECE // 2`` characters at a fixed offset, so the scrubber looks for
those blocks with ``str.find`` and grows each hit as far as it agrees with
the form.

:func:`scrub_result` applies the process's scrubber (:func:`process_scrubber`:
the secrets of every :class:`~farm.config.FarmConfig` built in this process,
read from the environment at the time) to a result in place; the writers'
fan-out calls it before any writer sees the result, so JSONL, Parquet,
``--json`` events, JUnit, HTML and the console all get the scrubbed record.
What comes in from elsewhere and is written or printed without being a result
is scrubbed where it comes in: a generator's cases (:meth:`Scrubber.scrub_json`,
before they are checked, so ids, inputs, tags, renames, dropped-case lines,
``generated.jsonl`` and ``--dry-run`` output are clean) and a reporter's text.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit, urlunsplit

from pydantic import BaseModel

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.results._records import CaseResult

__all__ = [
    "MASK",
    "MIN_PIECE",
    "MIN_SECRET",
    "Scrubber",
    "config_secrets",
    "header_secrets",
    "looks_secret",
    "process_scrubber",
    "redact_url",
    "register",
    "scrub_result",
    "url_secrets",
]

MASK = "***"

MIN_PIECE = 12
"""The shortest piece of a secret that is masked on its own."""

MIN_SECRET = 8
"""Secrets from a config shorter than this are not secrets (masking them would garble replies)."""

_BLOCK = MIN_PIECE // 2

_SECRET_WORDS = ("auth", "key", "token", "secret", "cookie", "pass", "pwd", "sig", "credential")


def looks_secret(name: str) -> bool:
    """Whether a header or query parameter called ``name`` is where a secret goes."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def header_secrets(headers: dict[str, str]) -> set[str]:
    """The values of secret-looking headers, each also without a scheme word (``Bearer <token>``)."""
    found: set[str] = set()
    for name, value in headers.items():
        if looks_secret(name):
            found |= {value, value.split(" ", 1)[-1]}
    return found


def url_secrets(url: str) -> list[str]:
    """The secrets written into ``url``: its password, ``user:password``, and secret-looking query values."""
    parts = urlsplit(str(url))
    found = []
    if parts.password:
        found.append(parts.password)
        found.append(f"{parts.username or ''}:{parts.password}")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if looks_secret(name) and value:
            found.append(value)
    for pair in parts.query.split("&"):  # as written, before decoding
        name, _, value = pair.partition("=")
        if looks_secret(name) and value:
            found.append(value)
    return found


def redact_url(url: str) -> str:
    """``url`` with its user info and secret-looking query values replaced by :data:`MASK`."""
    parts = urlsplit(str(url))
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{name}={MASK}" if looks_secret(name) and sep else pair
        for pair in parts.query.split("&")
        if pair
        for name, sep, _ in [pair.partition("=")]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _base64_cores(data: bytes) -> list[str]:
    """The base64 characters that depend only on ``data``, at each of the three byte alignments."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii").rstrip("=")
        start = -(-offset * 8 // 6)  # first character holding no padding bit
        end = (offset + len(data)) * 8 // 6  # characters after this mix in what follows
        core = encoded[start:end]
        cores += [core, core.replace("+", "-").replace("/", "_")]
    whole = base64.b64encode(data).decode("ascii")
    cores += [whole, whole.rstrip("="), base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")]
    return cores


def _forms(secret: str) -> set[str]:
    forms = {secret, secret.upper(), secret.lower(), secret[::-1], quote(secret, safe=""), quote(secret), quote_plus(secret)}
    forms.update(_base64_cores(secret.encode("utf-8")))
    return {form for form in forms if form}


class Scrubber:
    """Masks a fixed set of secrets, whole, encoded or in pieces (see the module doc)."""

    def __init__(self, secrets: Iterable[str] = (), *, min_length: int = 4):
        self.secrets = frozenset(s for s in secrets if isinstance(s, str) and len(s) >= min_length)
        forms: set[str] = set()
        for secret in self.secrets:
            forms |= _forms(secret)
            if secret != secret.strip():
                forms |= _forms(secret.strip())
        # a form JSON would escape cannot be looked for in a JSON dump
        self._json_safe = not any(c in form for form in forms for c in '"\\') and all(form.isprintable() for form in forms)
        self._short = sorted((f for f in forms if min_length <= len(f) < MIN_PIECE), key=len, reverse=True)
        self._anchors: dict[str, list[tuple[str, int]]] = {}
        for form in forms:
            if len(form) < MIN_PIECE:
                continue
            for start in range(0, len(form) - _BLOCK + 1, _BLOCK):
                self._anchors.setdefault(form[start : start + _BLOCK], []).append((form, start))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __repr__(self) -> str:  # never the secrets themselves
        return f"Scrubber({len(self.secrets)} secret(s))"

    def hits(self, text: str) -> bool:
        """Whether ``text`` may hold a secret (a cheap test before :meth:`scrub`)."""
        return any(anchor in text for anchor in self._anchors) or any(form in text for form in self._short)

    def scrub(self, text: str) -> str:
        """``text`` with every secret, encoded form and piece of :data:`MIN_PIECE`+ characters masked."""
        if not self.secrets or not text:
            return text
        spans: list[tuple[int, int]] = []
        for anchor, places in self._anchors.items():
            at = text.find(anchor)
            while at != -1:
                for form, start in places:
                    spans.extend(self._grow(text, at, form, start))
                at = text.find(anchor, at + 1)
        if spans:
            text = self._mask(text, spans)
        for form in self._short:
            if form in text:
                text = text.replace(form, MASK)
        return text

    @staticmethod
    def _grow(text: str, at: int, form: str, start: int) -> list[tuple[int, int]]:
        """The stretch of ``text`` around ``at`` that agrees with ``form`` around ``start``, if long enough."""
        left = 0
        while at - left > 0 and start - left > 0 and text[at - left - 1] == form[start - left - 1]:
            left += 1
        right = _BLOCK
        while at + right < len(text) and start + right < len(form) and text[at + right] == form[start + right]:
            right += 1
        if left + right < MIN_PIECE:
            return []
        return [(at - left, at + right)]

    @staticmethod
    def _mask(text: str, spans: list[tuple[int, int]]) -> str:
        """``text`` with each run of overlapping or touching spans replaced by one :data:`MASK`."""
        spans.sort()
        out, pos = [], 0
        begin, end = spans[0]
        for b, e in spans[1:]:
            if b <= end:
                end = max(end, e)
                continue
            out += [text[pos:begin], MASK]
            pos, begin, end = end, b, e
        out += [text[pos:begin], MASK, text[end:]]
        return "".join(out)

    def scrub_value(self, value: Any) -> Any:
        """``value`` (JSON-like: strings, lists, dicts, pydantic models) with its strings scrubbed.

        Returns the same object when nothing needed masking.
        """
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, BaseModel):
            for name in list(type(value).model_fields) + list(value.model_extra or {}):
                current = getattr(value, name, None)
                new = self.scrub_value(current)
                if new is not current:
                    if name in type(value).model_fields:
                        setattr(value, name, new)
                    else:
                        value.model_extra[name] = new  # type: ignore[index]
            return value
        if isinstance(value, list):
            new_items = [self.scrub_value(item) for item in value]
            if any(a is not b for a, b in zip(new_items, value, strict=True)):
                value[:] = new_items
            return value
        if isinstance(value, tuple):
            return tuple(self.scrub_value(item) for item in value)
        if isinstance(value, dict):
            changed = {}
            for key, item in value.items():
                new_key = self.scrub(key) if isinstance(key, str) else key
                new_item = self.scrub_value(item)
                if new_key is not key or new_item is not item:
                    changed[key] = (new_key, new_item)
            for key, (new_key, new_item) in changed.items():
                del value[key]
                value[new_key] = new_item
            return value
        return value

    def scrub_json(self, value: Any) -> Any:
        """``value`` (JSON-like, someone else's: a generator's cases) with its strings and keys
        scrubbed, as a copy; ``value`` itself when nothing needed masking."""
        if not self.secrets:
            return value
        if self._json_safe:
            try:
                text = json.dumps(value, ensure_ascii=False, default=str)
            except (TypeError, ValueError):  # a circular structure: look at every string
                text = None
            if text is not None and not self.hits(text):
                return value
        return self.scrub_value(copy.deepcopy(value))

    def scrub_result(self, result: CaseResult) -> CaseResult:
        """Scrub ``result`` in place (every string of it) and return it."""
        if self.secrets and (not self._json_safe or self.hits(result.model_dump_json())):
            self.scrub_value(result)
        return result

    @classmethod
    def from_config(cls, config: FarmConfig) -> Scrubber:
        """The secrets of ``config`` as the environment holds them now."""
        return cls(config_secrets(config), min_length=MIN_SECRET)


def config_secrets(config: FarmConfig) -> set[str]:
    """Every secret a config leads to: keys from the environment, secret header values, URL secrets."""
    found: set[str] = set()
    for connector in config.connectors.values():
        if connector.api_key_env:
            value = os.environ.get(connector.api_key_env)
            if value:
                found |= {value, value.strip()}
        found |= header_secrets(connector.headers)
        found.update(url_secrets(connector.base_url))
    for agent in config.agents.values():
        if agent.url:
            found.update(url_secrets(agent.url))
    return {s for s in found if len(s) >= MIN_SECRET}


# -- the process's scrubber ------------------------------------------------------

_CONFIGS: weakref.WeakValueDictionary[int, FarmConfig] = weakref.WeakValueDictionary()  # models are unhashable
_LOCK = threading.Lock()
_CACHE: dict[frozenset[str], Scrubber] = {}
_BY_INPUTS: dict[tuple[Any, ...], Scrubber] = {}
"""The scrubber for each set of what :func:`config_secrets` reads, so that a result (scrubbed
for every writer and again for the console) parses no URL once the secrets are known."""


def register(config: FarmConfig) -> None:
    """Let :func:`process_scrubber` know ``config``'s secrets (every FarmConfig registers itself)."""
    with _LOCK:
        _CONFIGS[id(config)] = config


def _secret_inputs(config: FarmConfig) -> tuple[Any, ...]:
    """Everything :func:`config_secrets` reads of ``config`` and of the environment, as it is now."""
    return (
        tuple(
            (c.api_key_env and os.environ.get(c.api_key_env), c.base_url, tuple(c.headers.items()))
            for c in config.connectors.values()
        ),
        tuple(agent.url for agent in config.agents.values()),
    )


def process_scrubber() -> Scrubber:
    """A scrubber for the secrets of every live config of this process, as the environment holds them now."""
    with _LOCK:
        configs = list(_CONFIGS.values())
    inputs = tuple(_secret_inputs(config) for config in configs)
    scrubber = _BY_INPUTS.get(inputs)
    if scrubber is None:
        scrubber = _scrubber_of(configs)
        with _LOCK:
            if len(_BY_INPUTS) > 16:
                _BY_INPUTS.clear()
            _BY_INPUTS[inputs] = scrubber
    return scrubber


def _scrubber_of(configs: list[FarmConfig]) -> Scrubber:
    """A scrubber for the secrets of ``configs``, shared with any earlier set that had the same."""
    secrets: set[str] = set()
    for config in configs:
        secrets |= config_secrets(config)
    key = frozenset(secrets)
    scrubber = _CACHE.get(key)
    if scrubber is None:
        scrubber = Scrubber(key, min_length=MIN_SECRET)
        with _LOCK:
            if len(_CACHE) > 16:
                _CACHE.clear()
            _CACHE[key] = scrubber
    return scrubber


def scrub_result(result: CaseResult, scrubber: Scrubber | None = None) -> CaseResult:
    """Mask every secret in ``result``, in place, before anything writes or prints it; returns it.

    ``scrubber`` defaults to :func:`process_scrubber`.
    """
    return (scrubber or process_scrubber()).scrub_result(result)
