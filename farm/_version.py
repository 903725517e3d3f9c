"""The farm's version, a leaf: ``run.json`` records it, and ``farm.__version__`` says it."""

__version__ = "0.1.0"
