"""cltune's version, in a module of its own: every row and header carries it."""

__version__ = "0.1.0"
