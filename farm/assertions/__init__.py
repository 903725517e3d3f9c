"""Assertions: deterministic checks and agent-judged ones, registered by type name."""

from farm.assertions.registry import (
    AssertionEnv,
    Outcome,
    Subject,
    assertion,
    describe,
    evaluate,
    known_types,
    truncate,
)

__all__ = ["AssertionEnv", "Outcome", "Subject", "assertion", "describe", "evaluate", "known_types", "truncate"]
