"""Generation: the cases a generator writes, asked in batches and accepted as they arrive (docs/generation.md).

``-i agents:<gen>?count=N`` (or ``scripts:<gen>``) is a source of cases
(:mod:`~farm.generation.sources`) whose suite has no cases yet: its feed
(:class:`~farm.generation.feed.GeneratedFeed`, a :class:`~farm.feed.CaseFeed`) hands over the
cases its :class:`CaseStream` produces while the run goes, from one of:

- the generation cache (:mod:`~farm.generation.cache`): a generation that ran to its end, kept
  whole, read back when the same command runs again;
- a generator script (:mod:`~farm.generation.script`): what its function returns or yields;
- a generator agent (:mod:`~farm.generation.agent`): asked in batches of ``batch`` cases
  (default :data:`DEFAULT_BATCH`), as many at once as its connector allows, every request
  different, until ``count`` cases are kept or it writes no more.

Every case is accepted only when it passes ``farm validate``'s checks and is no duplicate
(:mod:`~farm.generation.intake`), and appended to ``<run_dir>/generated.jsonl``
(:mod:`~farm.generation.store`) before it is yielded; ``--resume`` reads that file back and
generates only what is missing. What the generator is asked is checked and read once
(:mod:`~farm.generation.query`); what the generation did is :class:`GenerationStats`.

API (the engine gives ``generate``: one generator role call)::

    stream = suite.feed.stream              # from farm.inputs.resolve_input
    resumed = stream.open(run_dir)          # cases already in generated.jsonl
    async for cases in stream.batches(generate, on_progress):
        ...                                 # run them
    stream.stats                            # run.json's "generation"
"""

from farm.generation.agent import GenerateCall
from farm.generation.intake import fingerprint
from farm.generation.query import DEFAULT_BATCH, DEFAULT_PATIENCE, DEFAULT_SEED, check_query
from farm.generation.stats import GenerationStats
from farm.generation.store import GENERATED_JSONL
from farm.generation.stream import CaseStream, collect, generate_locally

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_PATIENCE",
    "DEFAULT_SEED",
    "GENERATED_JSONL",
    "CaseStream",
    "GenerateCall",
    "GenerationStats",
    "check_query",
    "collect",
    "fingerprint",
    "generate_locally",
]
