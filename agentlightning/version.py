"""The package's version (a ground-layer module, so that any layer can read it without importing the root)."""

__version__ = "0.3.0"
