"""The deploy path: inputs -> the kernel's measurements -> the deployment -> the header, the JSON
tuning file and its flat form, checked by the output guard and written whole or not at all."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UserError
from ..results.guard import check_output
from . import model, sources
from .header import c_name, to_header
from .kt_results import from_kt_results, is_kt_results
from .tuning_json import flat_path, to_flat, to_json, write_all
from .user_kernel import check_rows, load_problem


def read_inputs(files: list[str], db: str | None) -> tuple[list[dict], str]:
    """(measurements, what they were read from, for messages): results files (cltune CSV, Kernel
    Tuner results JSON), or the best-config database ("" for the default one)."""
    if bool(files) == (db is not None):
        raise UserError("give RESULTS files (cltune CSV or Kernel Tuner results JSON) or --db, one of the two")
    if not files:
        return sources.from_database(db or None), db or "the best-config database"

    kt = [f for f in files if is_kt_results(f)]
    csvs = [f for f in files if f not in kt]
    ms = (sources.from_results(csvs) if csvs else []) + [m for f in kt for m in from_kt_results(f)]
    return ms, ", ".join(files)


def outputs(out_dir: str | Path, name: str) -> dict[str, Path]:
    base = Path(out_dir) / f"cltune_{name}"
    json_path = base.with_suffix(".json")
    return {"header": base.with_suffix(".h"), "json": json_path, "flat": flat_path(json_path)}


def with_config(ms: list[dict], config: str | None, kernel: str, where: str) -> list[dict]:
    """The measurements, each given the kernel's KernelProblem when `config` is a kernel of your own
    (user_kernel.py then makes its launches)."""
    if config is None:
        return ms

    problem = load_problem(config)
    if problem.family != kernel:
        raise UserError(f"--config {config}: is kernel {problem.family!r}, the input's is {kernel!r}")
    check_rows(problem, ms, where)
    return [dict(m, kernel_problem=problem) for m in ms]


def deploy(files: list[str], db: str | None, kernel: str | None, name: str | None, shapes: list[str],
           max_distance: float, out_dir: str | Path, config: str | None = None) -> tuple[dict[str, Path], dict]:
    """Write cltune_<name>.h, .json and .tsv into out_dir; ({kind: path}, the deployment)."""
    ms, where = read_inputs(files, db)
    kernel, ms = sources.of_kernel(ms, kernel, where)
    ms = with_config(ms, config, kernel, where)
    # a kernel of your own is named by its function (kernel:sgemm -> sgemm)
    name = c_name(name or kernel.removeprefix("kernel:"), "--name" if name else "--kernel (or give --name)")
    paths = outputs(out_dir, name)
    inputs = list(files) + ([db] if db else []) + ([config] if config else [])
    for p in paths.values():
        check_output(p, inputs, option="--out folder or --name")
    deployment = model.build(ms, kernel, list(shapes), max_distance)
    write_all({paths["header"]: to_header(deployment, name), paths["json"]: to_json(deployment),
               paths["flat"]: to_flat(deployment)})
    return paths, deployment
