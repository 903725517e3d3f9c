"""Generation lives in :mod:`farm.generation`; its public names are importable from here too."""

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
