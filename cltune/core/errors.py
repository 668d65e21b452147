"""Errors a user can fix; the CLI prints them as one line, never a traceback."""


class UserError(ValueError):
    """Bad input (config, CLI argument, API argument, device choice): the message names what and why."""


def first_line(text, limit: int = 400) -> str:
    """The first line of a message (an exception's text, a log), cut to `limit` characters with
    "..." where it was cut: what a row's `error` column or a one-line error shows."""
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."
