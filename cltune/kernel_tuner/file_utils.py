"""Kernel Tuner's file_utils: tuning results and the machine they came from, written as T4 JSON
(the community's format, results/t4.py) as Kernel Tuner 1.5 writes them, and its T1 input file
read. The machine is described from this host and pyopencl (where Kernel Tuner runs lshw and
nvidia-smi); without a driver the metadata says what is missing."""

from __future__ import annotations

import json
import os
import platform
import re
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

from ..core.errors import UserError, first_line
from ..measure.hostgemm import host_cpu
from ..results import t4
from ..results.guard import T4, check_output
from ..results.ktcache import load, plain

TIMING_KEYS = ("compile_time", "benchmark_time", "framework_time", "strategy_time", "verification_time")
ERROR_INVALIDITY = {"CompilationFailedConfig": "compile", "RuntimeFailedConfig": "runtime",
                    "InvalidConfig": "constraints", "WrongResultConfig": "correctness", "ErrorConfig": "runtime"}
OS_NAMES = {"Linux": "Linux", "Windows": "Windows", "Darwin": "Mac"}


def filename_ensure_json_extension(filename) -> str:
    """The name with ".json" added when it lacks it, as Kernel Tuner names its files."""
    filename = str(filename)
    return filename if filename.endswith(".json") else filename + ".json"


def make_filenamepath(filenamepath: Path) -> None:
    """Makes the folder the file goes into."""
    Path(filenamepath).parent.mkdir(parents=True, exist_ok=True)


def get_configuration_validity(error) -> str:
    """T4's invalidity of a result's `__error__` (an error class, or None for a setting that ran)."""
    if error is None:
        return "correct"
    return ERROR_INVALIDITY.get(type(error).__name__, ERROR_INVALIDITY.get(str(error), "runtime"))


def _invalidity(result: dict) -> str:
    status = result.get("status")  # cltune's own results say more (timeout) than the error class does
    if isinstance(status, str) and status in t4.INVALIDITY:
        return t4.INVALIDITY[status]
    return get_configuration_validity(result.get("__error__"))


def get_t4_results(results, tune_params, objective="time") -> dict:
    """The results of tune_kernel (a list of dicts) as a T4 results document: per setting its knobs,
    timings, validity, and every other key as a measurement (a time in ms)."""
    if isinstance(objective, (list, tuple)):
        if len(objective) != 1:
            raise ValueError("objective: the T4 format does not support multiple objectives")
        objective = objective[0]
    skip = set(tune_params) | set(TIMING_KEYS) | {"timestamp", "times", "__error__"}
    entries = []
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            raise UserError(f"results[{i}]: expected a result dict as tune_kernel returns, got {type(r).__name__}")
        runtimes = r.get("times")
        times = t4.timings(r.get("compile_time"), [] if runtimes is None else runtimes, r.get("benchmark_time"),
                           r.get("framework_time"), r.get("strategy_time"), r.get("verification_time"))
        measured = [t4.measurement(k, v, _unit(k)) for k, v in r.items() if k not in skip]
        entries.append(t4.entry({k: v for k, v in r.items() if k in tune_params}, times, _invalidity(r),
                                [m for m in measured if m], [objective], r.get("timestamp")))
    return t4.document(entries)


def _unit(key: str) -> str:
    """Kernel Tuner's rule (a key that starts with "time" is in ms), and cltune's `_ms` keys."""
    return "ms" if key.startswith("time") or key.endswith("_ms") else ""


def store_output_file(output_filename, results, tune_params, objective="time") -> None:
    """Writes tune_kernel's results to `output_filename` (".json" added) as T4 results. An earlier
    T4 file is replaced; a cltune results file or Kernel Tuner cache is never written over."""
    path = _output(output_filename, "output_filename")
    _write(path, get_t4_results(results, tune_params, objective), indent=None)


def get_dependencies(package="cltune") -> list:
    """`name==version` of the package and each requirement of it that is installed."""
    try:
        reqs = requires(package) or []
        found = [f"{package}=={version(package)}"]
    except PackageNotFoundError:
        return []
    for name in dict.fromkeys(re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in reqs):
        try:
            found.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            pass  # not installed: it cannot have taken part
    return found


def get_device_query(target="opencl"):
    """The OpenCL devices pyopencl sees (cltune's description of each). Kernel Tuner's targets
    ('nvidia', 'amd': nvidia-smi, rocm-smi) are not run here."""
    if target != "opencl":
        raise ValueError(f"target: cltune describes OpenCL devices ('opencl'), not {target!r}")
    from ..measure.device import all_devices, describe  # pyopencl (0.7 s): only where this process opens a device

    return [describe(i, p, d).as_dict() for i, (p, d) in enumerate(all_devices())]


def _opencl_devices():
    try:
        return get_device_query("opencl")
    except Exception as exc:  # noqa: BLE001 (no pyopencl, no driver, a broken ICD: said, not raised)
        why = (first_line(exc) if isinstance(exc, UserError) else "pyopencl cannot be imported" if
               isinstance(exc, ImportError) else f"{type(exc).__name__}: {first_line(exc)}")
        return {"error": f"no OpenCL device described: {why}"}


def host() -> dict:
    """This machine: OS, processor and its vector extensions, logical CPUs, memory."""
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return {"id": "host", "class": "system", "os": f"{platform.system()} {platform.release()}",
            "machine": platform.machine(), "cpu": host_cpu(), "logical_cpus": os.cpu_count(),
            "memory_bytes": memory, "python": platform.python_version()}


def get_t4_metadata() -> dict:
    """The T4 metadata document: the host (hardware), its OpenCL devices (device_query) and the
    installed versions of cltune and its requirements."""
    os_name = OS_NAMES.get(platform.system(), "unidentified OS")
    metadata = {"operating_system": os_name,
                "hardware": {"hardware_description": [host()], "operating_system": os_name},
                "environment": {"device_query": {"opencl": _opencl_devices()}, "requirements": get_dependencies()}}
    return {"metadata": metadata, "schema_version": t4.SCHEMA_VERSION}


def store_metadata_file(metadata_filename) -> None:
    """Writes get_t4_metadata() to `metadata_filename` (".json" added)."""
    path = _output(metadata_filename, "metadata_filename")
    _write(path, get_t4_metadata(), indent="  ")


def get_input_file(filepath, validate=True) -> dict:
    """A T1 input file (JSON); with `validate`, its required keys are checked (one line naming the
    file and the key)."""
    path = Path(filepath)
    if not path.is_file():
        raise UserError(f"{path}: no such T1 input file")
    data = load(path)
    if validate:
        _check_t1(path, data)
    return data


T1_REQUIRED = {"ConfigurationSpace": ("TuningParameters",),
               "KernelSpecification": ("Language", "KernelName", "KernelFile", "GlobalSize", "LocalSize")}


def _check_t1(path: Path, data) -> None:
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a T1 input object, got {type(data).__name__}")
    for section, keys in T1_REQUIRED.items():
        if not isinstance(data.get(section), dict):
            raise UserError(f"{path}: {section}: expected an object with {', '.join(keys)}")
        missing = [k for k in keys if k not in data[section]]
        if missing:
            raise UserError(f"{path}: {section}.{missing[0]}: missing (a T1 input needs {', '.join(keys)})")


def _output(filename, option: str) -> Path:
    path = Path(filename_ensure_json_extension(filename))
    check_output(path, option=option, allowed=(T4,))
    make_filenamepath(path)
    return path


def _write(path: Path, doc: dict, indent) -> None:
    try:
        text = json.dumps(doc, indent=indent, default=plain, allow_nan=False)
    except ValueError as exc:  # NaN or infinity where T4 wants a number
        raise UserError(f"{path}: not written: {exc}") from None
    try:
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"{path}: cannot be written: {exc.strerror or exc}") from None
