"""One sweep on a farm: every device kind of the farm tuned at once, each on its own workers,
each into its own results file, through the same session as a local sweep (tune.run with a
FarmBackend per kind)."""

from __future__ import annotations

import threading
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..core.paths import slug
from ..measure.backend import open_backend
from ..results import schema
from ..results.csvfile import header_identity, read
from ..drive import tune
from .cluster import GRACE_S, Farm, Kind
from .tls import access


def sweep(cfg, opts, spec: str, on_row: Callable[[dict], None] = lambda row: None,
          on_kind: Callable[[Kind, object], None] = lambda kind, opts: None, grace_s: float = GRACE_S) -> list:
    """Tune cfg (merged with opts: tune.merge) on every device kind of the farm at once (each kind on its own boards, in a thread
    of its own), each into its own results file (a file holds one device's rows). Returns, per kind
    tuned, a tune.Result with its `kind` and `rerank_worker` set, or the exception that stopped that
    kind (the other kinds go on). `on_kind(kind, None)` tells of a kind left out of a resume."""
    farm = Farm(spec, opts.device, access=access(spec, opts.tls, opts.insecure))
    try:
        todo = []
        for kind in farm.kinds:
            kind_opts = kind_options(cfg, opts, kind, len(farm.kinds))
            on_kind(kind, kind_opts)
            if kind_opts is not None:
                todo.append((kind, kind_opts))

        def tune_kind(kind, kind_opts):
            return _tune_kind(farm, cfg, opts, kind, kind_opts, on_row, grace_s)

        if len(todo) == 1:  # its error is the sweep's, without the kind's name before it
            return [tune_kind(*todo[0])]
        return _in_threads(tune_kind, todo)
    finally:
        farm.close()


def _tune_kind(farm: Farm, cfg, opts, kind: Kind, kind_opts, on_row, grace_s: float):
    if kind_opts is not opts and kind_opts.out:  # its own file, named after the kind
        tune.check_out(kind_opts.out)
    backend = open_backend("farm:" + farm.spec, cfg, opts, farm=farm, kind=kind, grace_s=grace_s)
    res = tune.sweep(cfg, kind_opts, backend, on_row)
    res.kind, res.rerank_worker = kind, backend.rerank_worker
    return res


def _in_threads(fn, todo: list) -> list:
    """fn(kind, opts) for every kind at once; a kind's exception is its result, the others go on."""
    out: list = [None] * len(todo)  # each thread fills its own slot

    def one(i, kind, kind_opts):
        try:
            out[i] = fn(kind, kind_opts)
        except Exception as exc:  # noqa: BLE001 - reported by the caller with its kind
            exc.kind = kind
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i, *job), daemon=True, name=f"cltune-{job[0].key}")
               for i, job in enumerate(todo)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.5)  # in slices: Ctrl-C still reaches this thread
    return out


def kind_options(cfg, opts, kind: Kind, kinds: int):
    """A kind's options: its own file when the farm has several kinds (`--out X.csv` becomes
    X-<device>-<kind>.csv); resuming a file, only the kind it was written for (None for the others)."""
    if kinds == 1:
        return opts
    if opts.resume:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the sweep itself reads it again and warns
            held = header_identity(read(opts.resume))
        wanted = schema.make_header(cfg.name, cfg.problem.key, kind.info)
        return opts if held is None or schema.difference(held, wanted) is None else None
    if not opts.out:
        return opts  # results/<config>_<device>_<time>.csv: one per kind already
    out = Path(opts.out)
    name = f"{out.stem}-{slug(kind.info.name, 40)}-{kind.key[-6:]}{out.suffix or '.csv'}"
    return replace(opts, out=out.with_name(name))
