"""Kernel Tuner's options in cltune's terms: its strategy names, strategy_options, objectives,
language, device numbering and `parallel`, each checked before a device is opened."""

from __future__ import annotations

import math
import warnings

# Kernel Tuner strategy -> the closest registered cltune strategy (search/strategies.py); the table
# and the reasons are in docs/user-kernels.md.
STRATEGIES = {
    "brute_force": "exhaustive",
    "random_sample": "random",
    "bayes_opt": "model",  # a Gaussian process and expected improvement, as Kernel Tuner's
    "skopt": "model",
    # population-based global searches: a sampler that learns where the good points are
    "genetic_algorithm": "tpe", "diff_evo": "tpe", "pso": "tpe", "firefly_algorithm": "tpe",
    "hybrid_vndx": "tpe", "adaptive_tabu_greywolf": "tpe", "pyatf_strategies": "tpe",
    # moves to neighbouring points from a current best, restarting when stuck
    "basinhopping": "local", "dual_annealing": "local", "simulated_annealing": "local", "minimize": "local",
    "greedy_ils": "local", "greedy_mls": "local", "mls": "local", "ordered_greedy_mls": "local",
}
# What `parallel` gives a strategy Kernel Tuner runs in parallel; others get one worker, as there.
PARALLEL = ("brute_force", "random_sample", "diff_evo", "genetic_algorithm", "pso", "firefly_algorithm")
OBJECTIVE_DIRECTIONS = {"time": False, "energy": False, "fitness": True, "cost": False, "loss": False,
                        "GFLOP/s": True, "TFLOP/s": True, "GB/s": True, "TB/s": True, "GFLOPS/W": True,
                        "TFLOPS/W": True, "GFLOP/J": True, "TFLOP/J": True}
FORBIDDEN_KNOBS = ("grid_size_x", "grid_size_y", "grid_size_z", "time")
UNUSED_STRATEGY_OPTIONS = {"max_fevals", "time_limit", "fraction"}  # the ones that map (budget)


class StrategyOptionIgnored(UserWarning):
    """A strategy_options key with no meaning for the cltune strategy a Kernel Tuner name maps to."""


def check_unsupported(lang, smem_args, cmem_args, texmem_args, observers, compiler) -> None:
    """What cannot apply to OpenCL here, raised as Kernel Tuner raises it."""
    if lang is not None and str(lang).upper() != "OPENCL":
        raise NotImplementedError(f"lang={lang!r}: cltune.kernel_tuner tunes OpenCL kernels only "
                                  "(Kernel Tuner's CUDA, HIP, C, Fortran and Julia backends are not here)")
    for name, value, what in (("smem_args", smem_args, "shared"), ("cmem_args", cmem_args, "constant"),
                              ("texmem_args", texmem_args, "texture")):
        if value is not None:
            raise NotImplementedError(f"{name}: the OpenCL backend does not support {what} memory arguments")
    if observers:
        raise NotImplementedError("observers: Kernel Tuner's observers (NVML, power, PMT) need its CUDA/HIP "
                                  "backends; cltune records kernel time, build and verification only")
    if compiler is not None:
        warnings.warn("compiler: used for C and Fortran kernels only; ignored for OpenCL (as Kernel Tuner "
                      "ignores it)", UserWarning, stacklevel=3)


def check_knobs(tune_params) -> None:
    if not isinstance(tune_params, dict):
        raise ValueError(f"tune_params: expected a dict of knob name -> list of values, got "
                         f"{type(tune_params).__name__}")
    for name, values in tune_params.items():
        if name in FORBIDDEN_KNOBS:
            raise ValueError(f"Tune parameter {name} with value {values} has a forbidden name!")
        if str(name).startswith("nvml_"):
            raise ValueError(f"tune_params: {name}: parameters starting with nvml_ need Kernel Tuner's "
                             "NVMLObserver, which OpenCL has not")


def objective(objective, higher_is_better, objectives) -> tuple[str, bool]:
    """(objective, higher_is_better) with Kernel Tuner's defaults; one objective only."""
    if objectives:
        if not isinstance(objectives, dict):
            raise ValueError("objectives should be a dict of (objective, higher_is_better) pairs")
        if len(objectives) != 1:
            raise NotImplementedError(f"objectives: {len(objectives)} objectives (a Pareto front) are not "
                                      "supported; give one")
        (objective, higher_is_better), = objectives.items()
    objective = objective or "time"
    if higher_is_better is None:
        if objective not in OBJECTIVE_DIRECTIONS:
            raise ValueError(f"Please specify objective_higher_is_better for objective {objective}")
        higher_is_better = OBJECTIVE_DIRECTIONS[objective]
    if not isinstance(objective, str):
        raise ValueError(f"objective: expected the name of a result key (\"time\" or a metric), got {objective!r}")
    return objective, bool(higher_is_better)


def strategy(name) -> str:
    """The cltune strategy for Kernel Tuner's `strategy` (None: brute_force)."""
    if name is None:
        return "exhaustive"
    if not isinstance(name, str) or name not in STRATEGIES:
        shown = name if isinstance(name, str) else type(name).__name__
        raise ValueError(f"Unkown strategy {shown}, must be one of: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]


def budget(name, strategy_options, space_size) -> tuple[int | None, float | None]:
    """(settings budget, seconds) from strategy_options; random_sample's `fraction` (default 0.1,
    as Kernel Tuner's) sizes its budget when max_fevals does not. Other keys: one warning each."""
    so = dict(strategy_options or {})
    if not isinstance(strategy_options, (dict, type(None))):
        raise ValueError(f"strategy_options: expected a dict, got {type(strategy_options).__name__}")
    fevals, limit = so.get("max_fevals"), so.get("time_limit")
    if fevals is not None and (isinstance(fevals, bool) or not isinstance(fevals, (int, float)) or fevals < 1):
        raise ValueError(f"strategy_options['max_fevals']: expected an int >= 1, got {fevals!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))
                              or not math.isfinite(limit) or limit <= 0):
        raise ValueError(f"strategy_options['time_limit']: expected seconds > 0, got {limit!r}")
    if name == "random_sample" and fevals is None:
        fraction = so.get("fraction", 0.1)
        if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"strategy_options['fraction']: expected a number in [0, 1], got {fraction!r}")
        fevals = max(1, math.ceil(space_size * fraction))
    for key in so:
        if key not in UNUSED_STRATEGY_OPTIONS:
            warnings.warn(f"strategy_options[{key!r}]: Kernel Tuner's {name or 'brute_force'} option has no "
                          f"meaning for cltune's {strategy(name)} search; ignored", StrategyOptionIgnored,
                          stacklevel=3)
    return (int(fevals) if fevals is not None else None), (float(limit) if limit is not None else None)


def device_index(platform, device) -> int | None:
    """cltune's flat device index for Kernel Tuner's (platform, device within it); None for the
    defaults (0, 0): then $CLTUNE_DEVICE or the first working device, as every cltune command."""
    for name, value in (("platform", platform), ("device", device)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}: expected an index >= 0, got {value!r}")
    if platform == 0 and device == 0:
        return None
    from ..measure.device import all_devices  # pyopencl (0.7 s): only where this process opens a device

    pairs = all_devices()
    platforms = []
    for p, _ in pairs:
        if p not in platforms:
            platforms.append(p)
    if platform >= len(platforms):
        raise ValueError(f"platform: index {platform} is out of range: {len(platforms)} OpenCL platform(s)")
    flat = [i for i, (p, _) in enumerate(pairs) if p == platforms[platform]]
    if device >= len(flat):
        raise ValueError(f"device: index {device} is out of range: platform {platform} "
                         f"({platforms[platform].name}) has {len(flat)} device(s)")
    return flat[device]


def farm(parallel, strategy_name) -> str | None:
    """The Dask farm `parallel` asks for: True -> a local one of 2 workers, an int -> that many,
    a string -> a scheduler address (or local:N); None/False -> this process's device only."""
    if parallel is None or parallel is False:
        return None
    if isinstance(parallel, str):
        return parallel
    if parallel is True or (isinstance(parallel, int) and parallel >= 1):
        workers = 2 if parallel is True else int(parallel)
        return f"local:{workers if (strategy_name or 'brute_force') in PARALLEL else 1}"
    raise ValueError(f"parallel: expected True, a number of workers or a Dask scheduler address, got {parallel!r}")
