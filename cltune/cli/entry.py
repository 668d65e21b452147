"""The `cltune` command's entry point: a `cltune sweep` measured in a worker process starts that
worker first, then imports the rest of cltune and reads its config, while the worker starts up."""

from __future__ import annotations

import sys

NOT_EARLY = object()  # the command measures no setting in a local worker: nothing to start early


def early_device(args: list[str]):
    """The --device a `cltune sweep` command line gives its worker (None: the default device), or
    NOT_EARLY when it runs no local worker (help, --no-isolation, a farm) or is another command.
    Parsed here as click will parse it; where the two disagree the early worker goes unused."""
    from ..measure.backend import farm_spec

    if not args or args[0] != "sweep" or farm_spec():
        return NOT_EARLY
    device, rest = None, iter(args[1:])
    for arg in rest:
        if arg == "--":
            break
        if arg in ("--help", "--no-isolation") or arg == "--farm" or arg.startswith("--farm="):
            return NOT_EARLY
        if arg in ("--device", "-d"):
            device = next(rest, None)
        elif arg.startswith("--device="):
            device = arg[len("--device="):]
        elif arg.startswith("-d") and len(arg) > 2 and not arg.startswith("--"):
            device = arg[2:]
    return device


def main() -> None:
    device = early_device(sys.argv[1:])
    if device is not NOT_EARLY:
        from ..measure.worker import start_early

        start_early(device)
    from .commands import main as cli

    cli(prog_name="cltune")
