"""Results files and what is kept from them: the column schema, rows, the crash-safe CSV file, the
best-config and peak databases, and loaded runs. `cltune.results.load(path)` reads a results file."""


def __getattr__(name: str):
    """A module of this folder, else the row-level API (load, ok_rows, summary, ...) of rows.py:
    imported on first use, so that importing one module of this folder loads no other."""
    import importlib

    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    rows = importlib.import_module(f"{__name__}.rows")
    try:
        return getattr(rows, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
