"""Agent Test Farm: the engine-agnostic core (no Ray here)."""

__version__ = "0.1.0"
