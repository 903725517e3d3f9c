"""An agent that is a Python function (``kind = "python"``, ``entry = "module:function"``).

The function takes ``(messages, options)`` and may be sync or async. A sync one
runs in a worker thread, so a slow agent never stalls the other conversations
on the same event loop: on the agent's own thread pool, with a thread for every
conversation that calls it at once (up to its ``concurrency``, else
:data:`SYNC_THREADS`), made as needed. asyncio's shared default pool has
``cpu_count + 4`` threads: 64 conversations of an agent that blocks 0.2 s per
reply took 2.3 s there instead of 0.2 s. Threads share one interpreter, so a
sync agent that computes in Python runs one reply at a time per process (the
GIL): the ray engine, with ``resources`` declared, is how such an agent uses
more cores. It returns:

- a string: the reply's content;
- a dict with ``content``, ``tool_calls`` (``[{name, arguments}]`` or the
  OpenAI shape), ``awaiting_input``, ``input_hint``, ``usage``,
  ``finish_reason`` (a whole OpenAI ``chat.completion`` body is read as one);
- or a :class:`Reply`.

It gets copies of the messages and options, so it cannot change the session's
history by accident.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from farm.agents.base import AgentError, AgentResponseError, Message, Reply, replied, stable_options
from farm.agents.openai import (
    as_bool,
    content_text,
    excerpt,
    parse_completion,
    parse_tool_calls,
    parse_usage,
)
from farm.config import AgentConfig
from farm.errors import UsageError
from farm.wording import nearest, nearest_name

__all__ = ["SYNC_THREADS", "PythonAgent", "load_entry", "reply_from"]

SYNC_THREADS = 256
"""Threads a sync agent's replies run on at most, per process, when the agent sets no ``concurrency``."""


def load_entry(entry: str | None, agent_id: str, where: str | None = None) -> Callable[..., Any]:
    """The callable named by ``module:function`` (``function`` may be dotted, e.g. ``Agent.answer``).

    Raises :class:`UsageError` naming the agent's ``entry`` when it cannot be used: ``where`` is
    how the problem begins (``farm.toml:12: key 'entry'``; default ``agents."<id>".entry``), and a
    misspelt function names the module's nearest public one.
    """
    where = where or f'agents."{agent_id}".entry'
    if not entry or ":" not in entry:
        raise UsageError(f"{where}: '{entry or ''}' is not of the form 'module:function'")
    module_name, _, attribute = entry.partition(":")
    module_name, attribute = module_name.strip(), attribute.strip()
    if not module_name or not attribute:
        raise UsageError(f"{where}: '{entry}' is not of the form 'module:function'")
    try:
        module = _fresh(importlib.import_module(module_name))
    except Exception as exc:  # ImportError, or whatever the module raises while it loads
        raise UsageError(f"{where}: module '{module_name}' cannot be imported: {type(exc).__name__}: {exc}") from None
    target: Any = module
    found: list[str] = []
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            close = nearest_name(name, _callables(target))
            hint = f" (did you mean '{'.'.join([*found, close])}'?)" if close else ""
            raise UsageError(f"{where}: module '{module_name}' has no attribute '{attribute}'{hint}") from None
        found.append(name)
    if not callable(target):
        raise UsageError(f"{where}: '{entry}' is a {type(target).__name__}, not a function")
    takes = _wrong_signature(target)
    if takes is not None:
        raise UsageError(f"{where}: '{entry}' {takes}; an agent function takes (messages, options)")
    return target


def _wrong_signature(fn: Any) -> str | None:
    """What ``fn`` takes when it cannot be called as ``fn(messages, options)`` (every agent, and
    every python function playing a role, is called so), or None: defaults, ``*args`` and
    ``**kwargs`` are fine. A callable whose signature Python cannot tell (a builtin) is let be."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None, None)
    except TypeError:
        pass
    else:
        return None
    if not signature.parameters:
        return "takes no arguments"
    parts, starred = [], False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and not starred:
            parts.append("*")
            starred = True
        prefix = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**" if parameter.kind is parameter.VAR_KEYWORD else ""
        starred = starred or parameter.kind is parameter.VAR_POSITIONAL
        default = "=..." if parameter.default is not parameter.empty else ""
        parts.append(f"{prefix}{parameter.name}{default}")
    return f"takes ({', '.join(parts)})"


_SOURCE_SEEN: dict[str, tuple[float, int]] = {}
"""The source file's (mtime, size) of each agent module when this process loaded it."""


def _callables(owner: Any) -> list[str]:
    """The public names of ``owner`` that can be called: what an entry may name there."""
    names = []
    for name in dir(owner):
        if name.startswith("_"):
            continue
        try:
            if callable(getattr(owner, name)):
                names.append(name)
        except Exception:  # a property or module attribute that raises: not an entry
            continue
    return names


def _fresh(module: Any) -> Any:
    """``module`` as its source file now is: a process that runs again (a notebook, a session actor
    kept for the next run) loads an agent's module again once its file was edited since."""
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return module
    try:
        stat = os.stat(path)
    except OSError:
        return module
    now = (stat.st_mtime, stat.st_size)
    seen = _SOURCE_SEEN.setdefault(module.__name__, now)
    if seen != now:
        module = importlib.reload(module)
        _SOURCE_SEEN[module.__name__] = now
    return module


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 (an object whose __call__ is async)


class PythonAgent:
    """``send(messages, options) -> Reply`` by calling a Python function."""

    in_process = True
    """Its spans are made in this process, by the time it answers (:mod:`farm.traces.capture`)."""

    def __init__(self, agent_config: AgentConfig, fn: Callable[..., Any] | None = None):
        self.config = agent_config
        self.role_answers = False
        """A role's agent: a dict it returns is its answer (a simulator's ``{"input": …}``), not a reply."""
        self.fn = fn if fn is not None else load_entry(agent_config.entry, agent_config.id)
        self._threads: ThreadPoolExecutor | None = None

    def _pool(self) -> ThreadPoolExecutor:
        if self._threads is None:
            size = self.config.concurrency or SYNC_THREADS
            self._threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"agent-{self.config.id}")
        return self._threads

    def cache_key_parts(self, messages: list[Message], options: dict[str, Any]) -> dict[str, Any]:
        """What decides the answer (:mod:`farm.roles.cache`): the entry, the messages and the stable options."""
        return {"kind": "python", "agent": self.config.id, "entry": self.config.entry, "messages": messages, "options": stable_options(options)}

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply:
        messages = [dict(m) for m in messages]
        options = dict(options or {})
        try:
            if _is_async(self.fn):
                result = await self.fn(messages, options)
            else:
                # the thread runs in the caller's context: a span the agent makes is a child of its turn's
                call = functools.partial(contextvars.copy_context().run, self.fn, messages, options)
                result = await asyncio.get_running_loop().run_in_executor(self._pool(), call)
                if inspect.isawaitable(result):
                    result = await result
        except AgentError:
            raise
        except Exception as exc:
            error = AgentError(f"agent '{self.config.id}' ({self.config.entry}) raised {type(exc).__name__}: {exc}")
            error.traceback = user_traceback(exc)
            raise error from exc
        try:
            return reply_from(result, answers=self.role_answers)
        except AgentResponseError as exc:
            raise AgentResponseError(
                f"Cannot read the reply of agent '{self.config.id}' ({self.config.entry}): {exc}"
            ) from None

    async def aclose(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def __repr__(self) -> str:
        return f"PythonAgent({self.config.id!r}, entry={self.config.entry!r})"


TRACEBACK_LIMIT = 8000
"""The most of a traceback a result keeps, in characters: its end, where the agent raised."""


def user_traceback(exc: BaseException) -> str:
    """``exc``'s traceback as pytest shows a test's: the user's frames only (the farm's and the
    standard library's, its threads and its event loop, left out), masked of every secret the
    process knows, then cut to its last :data:`TRACEBACK_LIMIT` characters."""
    import sysconfig
    import traceback

    from farm.secrets import process_scrubber

    hidden = (str(Path(__file__).resolve().parents[1]), sysconfig.get_paths()["stdlib"])
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not str(Path(frame.filename).resolve()).startswith(hidden)]
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))
    text = process_scrubber().scrub(text)  # first: a cut must not leave a piece of a secret
    return text if len(text) <= TRACEBACK_LIMIT else "…" + text[-TRACEBACK_LIMIT:]


REPLY_KEYS = ("content", "tool_calls", "awaiting_input", "input_hint", "finish_reason", "usage")
"""What a python agent's dict reply may hold (or ``choices``: an OpenAI completion as it is)."""


def reply_from(result: Any, answers: bool = False) -> Reply:
    """What a Python agent returned, as a :class:`Reply`. A dict with neither ``content`` nor
    ``tool_calls`` is an error (read as an empty reply, it would pass every ``not_contains``),
    unless it is a role's answer (``answers``), which the role reads whole."""
    if isinstance(result, Reply):
        return result
    if isinstance(result, str):
        return Reply(content=result, raw=result)
    if isinstance(result, dict):
        if "choices" in result:
            return parse_completion(result)
        if not answers and "content" not in result and not result.get("tool_calls"):
            keys = ", ".join(map(repr, list(result)[:8])) or "none"
            hint = "".join(nearest(str(key), REPLY_KEYS) for key in result)[:60]
            raise AgentResponseError(f"it returned a dict with no 'content' nor 'tool_calls' (its keys: {keys}){hint}; a dict reply has 'content' (text) and may have {', '.join(REPLY_KEYS[1:])}")
        content = result.get("content")
        reply = Reply(
            content=content_text(content),
            tool_calls=parse_tool_calls(result.get("tool_calls")),
            awaiting_input=as_bool(result.get("awaiting_input")),
            input_hint=result["input_hint"] if isinstance(result.get("input_hint"), str) else None,
            finish_reason=result.get("finish_reason"),
            usage=parse_usage(result.get("usage")),
            raw=result,
        )
        return reply if answers else replied(reply, content, "its 'content'")
    raise AgentResponseError(
        f"it returned {type(result).__name__} {excerpt(repr(result), 80)}; expected a str, a dict or a Reply"
    )
