"""The `cltune` group and what every command module shares: its error handling (every mistake,
foreseen (UserError) or not, is one line and exit 2) and its common options. commands.py, report.py,
farm.py and net.py add their commands to `main`; commands.py imports them all."""

from __future__ import annotations

import io
import os
import sys
import warnings

import click

from ..core.errors import UserError, first_line
from ..core.version import __version__


class Fail(click.ClickException):
    exit_code = 2


class Group(click.Group):
    """Turns a UserError anywhere below into `Error: <one line>` and exit code 2; so too any other
    exception (bad input cltune did not foresee), with its type, unless --debug asks for the traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except UserError as exc:
            raise Fail(first_line(str(exc))) from None
        except BrokenPipeError:  # `cltune show x.csv | head`: the reader left, there is no one to tell
            _silence_stdout()
            raise click.exceptions.Exit(1) from None
        except OSError as exc:
            if ctx.params.get("debug"):
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            raise Fail(first_line(f"{where}{exc.strerror or exc}")) from None
        except Exception as exc:  # noqa: BLE001  (the one place that turns the unforeseen into a line)
            if ctx.params.get("debug"):
                raise
            raise Fail(first_line(f"{type(exc).__name__}: {exc}") + " (cltune --debug shows the traceback)") from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail a second time."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


class Seconds(click.ParamType):
    """A finite number of seconds > 0 and at most `max_s` (click's FloatRange lets nan and inf
    through; a wait of 1e308 s overflows the clocks and polls that time it)."""

    name = "seconds"

    def __init__(self, max_s: float = 1e7):  # 116 days
        self.max_s = max_s

    def convert(self, value, param, ctx):
        import math

        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(v) or v <= 0:
            self.fail(f"expected a finite number of seconds > 0, got {value!r}", param, ctx)
        if v > self.max_s:
            days = round(self.max_s / 86400)
            self.fail(f"expected at most {self.max_s:g} seconds ({days} day{'s' * (days != 1)}), "
                      f"got {value!r}", param, ctx)
        return v


def _warning_line(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


@click.group(cls=Group)
@click.version_option(__version__, prog_name="cltune")
@click.option("--debug", is_flag=True, envvar="CLTUNE_DEBUG", help="Show the traceback of an unexpected error.")
def main(debug):
    """Tune and measure OpenCL conv2d kernels (Mali T860 class GPUs, PoCL on any CPU)."""
    warnings.showwarning = _warning_line


device_option = click.option(
    "--device", "-d", default=None,
    help="Device index (see `cltune devices`) or name substring; default $CLTUNE_DEVICE, "
         "else the first GPU that passes the probe, else the first device that does.")


def seed_option(help: str = "Seed of the inputs and of random/TPE search."):
    from ..loader.config import SEED_MAX

    return click.option("--seed", type=click.IntRange(0, SEED_MAX), default=None, help=help)


def time_limit_option(help: str = "Seconds of search per space."):
    return click.option("--time-limit", type=Seconds(), default=None, help=help)


def timeout_option(help: str = "Seconds one setting may take before its worker is killed "
                               "(default: 10x the baseline's time, at least 60)."):
    # One day at most: a worker's wait is the timeout times the settings it measures at once, and a
    # poll() takes at most 2**31 ms (24.8 days).
    return click.option("--timeout", type=Seconds(max_s=86400), default=None, help=help)


def tls_options(fn):
    """--tls DIR and --insecure: how a command reaches a farm beyond this machine (farm/tls.py)."""
    fn = click.option("--insecure", is_flag=True,
                      help="Allow plain tcp to a farm beyond this machine: anyone on its network can run code "
                           "on the boards and forge results; every results file records it.")(fn)
    return click.option("--tls", default=None, metavar="DIR",
                        help="This machine's farm credentials (ca.pem, cert.pem, key.pem; made by "
                             "cltune farm-certs); default $CLTUNE_TLS.")(fn)
