"""The sweep's table as its rows come in, and its closing lines: one printer for `cltune sweep`
on this machine and on a farm."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import click

from ..core.records import TIMED
from ..results import schema

STATUS_WIDTH = 12


def row_line(row: dict, width: int) -> str:
    """A row as the table shows it: its fastest launch (what ranks it, and what `best:` and GFLOP/s
    speak of), then the median launch, then the medians of queue, submit and total."""
    def num(key):
        v = row.get(key)
        return f"{v:10.3f}" if isinstance(v, float) and v == v else f"{'-':>10}"

    gflops = row.get("gflops")
    gf = f"{gflops:8.2f}" if isinstance(gflops, float) and gflops == gflops else f"{'-':>8}"
    text = (f"{row['setting']:<{width}} {row['status']:<{STATUS_WIDTH}}"
            f"{num(schema.TIME)}{num('run_ms_median')}{num('queue_ms_median')}{num('submit_ms_median')}"
            f"{num('total_ms_median')} {gf}")
    if row.get("parts_run_ms"):
        text += f"  ({row['parts_run_ms']})"
    if row["status"] not in TIMED or row.get("error"):
        text += f"  {row['error']}"
    return text


class SweepTable:
    """Prints rows as a sweep records them: the heading with the first row (a sweep refused before
    measuring prints its one line of error without a table above it), a rule where a device kind's
    re-ranking starts, and on a farm the worker of each row. Rows of several kinds may come from
    several threads."""

    def __init__(self, names, progress: "Progress | None" = None, farm: bool = False):
        self.width = max([len(n) for n in names] + [24])
        self.progress, self.farm = progress, farm
        self.heading = [f"{'setting':<{self.width}} {'status':<{STATUS_WIDTH}}{'fastest':>10}{'median':>10}"
                        f"{'queue':>10}{'submit':>10}{'total':>10} {'GFLOP/s':>8}   (ms: the run's fastest and "
                        "median launch; queue, submit, total: medians)" + (" [worker]" if farm else "")]
        self.phase: dict = {}  # per device kind: kinds are tuned at once on a farm, their rows interleave
        self.lock = threading.Lock()

    def row(self, row: dict) -> None:
        with self.lock:
            if self.progress:
                self.progress.clear()
            if self.heading:
                click.echo(self.heading.pop())
            kind = (row["device"], row["driver"], row["compute_units"])
            if row["phase"] != self.phase.setdefault(kind, "search"):
                self.phase[kind] = row["phase"]
                if self.farm:
                    click.echo(f"-- {row['phase']} of {row['device']} ({row['compute_units']} CUs): the best "
                               "settings again, measured interleaved on one worker --")
                else:
                    click.echo(f"-- {row['phase']}: the best settings again, measured interleaved --")
            click.echo(row_line(row, self.width) + (f"  [{row['worker']}]" if self.farm else ""))
            if self.progress:
                self.progress.step()

    def done(self) -> None:
        if self.progress:
            self.progress.clear()


class Progress:
    """`[done/expected] elapsed, left` on a terminal's stderr, redrawn under the table's lines."""

    def __init__(self, expected: int):
        self.expected, self.done, self.t0 = max(expected, 1), 0, time.monotonic()
        self.on = sys.stderr.isatty()

    def clear(self) -> None:
        if self.on:
            click.echo("\r\033[K", err=True, nl=False)

    def step(self) -> None:
        self.done += 1
        if self.on:
            spent = time.monotonic() - self.t0
            left = spent / self.done * max(self.expected - self.done, 0)
            click.echo(f"[{self.done}/{self.expected}] {spent:.0f} s, about {left:.0f} s left",
                       err=True, nl=False)


def print_outcome(result, cfg) -> None:
    failed = [r["setting"] for r in result.rows if r["status"] not in TIMED and r["phase"] == "search"]
    if result.ranking:
        best = result.ranking[0]
        speedup = ""
        if result.baseline_ms:
            speedup = f", {result.baseline_ms / best[schema.TIME]:.2f}x the baseline {cfg.baseline}"
        median = best.get("run_ms_median")
        median = f", median {median:.3f} ms" if isinstance(median, float) else ""
        click.echo(f"best: {best['setting']} {best[schema.TIME]:.3f} ms (its fastest launch{median}){speedup}")
    per_family = schema.fastest([r for r in result.rows if r["phase"] == "search"], per="family")
    if len(per_family) > 1:
        ranked = sorted(per_family.items(), key=lambda kv: kv[1][schema.TIME])
        click.echo("best of each family (first pass): "
                   + ", ".join(f"{fam} {r[schema.TIME]:.3f} ms" for fam, r in ranked))
    timing = timing_line([r for r in result.rows if r["phase"] == "search" and r["status"] in TIMED])
    if timing:
        click.echo(timing)
    shown = ", ".join(failed[:10]) + (" ..." if len(failed) > 10 else "")
    click.echo(f"wrote {result.path} ({len(result.rows)} rows, {len(failed)} not ok"
               + (f": {shown}" if failed else "") + ")")


def timing_line(rows) -> str:
    """How steady this sweep's timed launches were (schema.slow_launches), and what a busy machine
    means for its ranking; "" when no setting had two launches."""
    slow, launches = schema.slow_launches([schema.samples(r) for r in rows])
    if not launches:
        return ""
    line = (f"timing: {slow} of {launches} timed launches ({slow / launches:.0%}) ran over "
            f"{schema.SLOW:g}x their setting's fastest")
    if slow > schema.BUSY * launches:
        line += ("; the machine was busy: settings this close may rank differently in another run "
                 "(measure again when it is quieter)")
    return line


class Interrupted(click.ClickException):
    """Ctrl-C: one line saying what was kept and how to go on (exit code 130, as a shell's)."""

    exit_code = 130

    def show(self, file=None) -> None:
        click.echo(self.message, err=True)


@contextmanager
def interrupts(describe):
    """Ctrl-C inside the block becomes `interrupted: ...`: describe(files) says what the results
    files the block opened hold and how to go on."""
    from ..results import rows

    start = len(rows.OPENED)
    try:
        yield
    except KeyboardInterrupt:
        files = list(dict.fromkeys(rows.OPENED[start:]))
        raise Interrupted(f"interrupted: {describe(files) if files else 'nothing was measured'}") from None


def kept(files) -> str:
    """What these results files hold now, and how to resume each."""
    from ..results import rows

    held = "; ".join(f"{rows.kept_rows(f)} rows kept in {f}" for f in files)
    return f"{held}; resume with {', '.join(f'--resume {f}' for f in files)}"


def kept_in_folder(files, resume: str) -> str:
    """Rows kept in the results files of a run folder (net, bench), and the command that goes on."""
    from ..results import rows

    folder = Path(files[0]).parent
    n = sum(rows.kept_rows(f) for f in files)
    return f"{n} rows kept in {folder}/ ({len(files)} results files); {resume.format(folder=folder)}"
