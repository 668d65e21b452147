"""Errors a user can fix; the CLI prints them as one line, never a traceback."""


class UserError(ValueError):
    """Bad input (config, CLI argument, API argument, device choice): the message names what and why."""
