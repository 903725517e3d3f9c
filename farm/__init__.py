"""Agent Test Farm: the engine-agnostic core (no Ray here)."""

__version__ = "0.1.0"

__all__ = ["RunResult", "__version__", "run", "run_async"]


def __getattr__(name: str):  # the API is imported on first use: `import farm.cases` stays light
    if name in ("run", "run_async", "RunResult"):
        from farm import api

        return getattr(api, name)
    raise AttributeError(f"module 'farm' has no attribute {name!r}")
