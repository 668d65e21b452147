"""Errors a user can fix; the CLI prints them as one line, never a traceback."""

import sys


class UserError(ValueError):
    """Bad input (config, CLI argument, API argument, device choice): the message names what and why."""


def first_line(text, limit: int = 400) -> str:
    """The first line of a message (an exception's text, a log), cut to `limit` characters with
    "..." where it was cut: what a row's `error` column or a one-line error shows."""
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def script(main) -> None:
    """Run a script's main() (benchmarks/): a UserError (a bad config path, a bad value) ends it as the
    CLI's do, one line `Error: ...` on stderr and exit status 2, instead of a traceback."""
    try:
        main()
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(2)
