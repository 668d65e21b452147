"""Large argument arrays reach the worker as files it maps (measure/shipping.spilled), never as a
pickle: same key, same rows; and an input's guard bands are still checked when its contents are
not read back (measure/kernel_data.read)."""

import dataclasses
import gc
import os
import subprocess
import sys

import numpy as np

import cltune
from cltune.api.kernel import kernel_config
from cltune.measure import shipping

SOURCE = r"""
__kernel void add(__global float* c, __global const float* a, __global const float* b, const int n) {
    const int i = get_global_id(0);
    if (i >= n) return;
    c[i] = a[i] + b[i];
#if MODE == 1
    if (i == n - 1) ((__global float*) b)[n + 1] = 0.0f;   /* writes past the end of an input */
#elif MODE == 2
    if (i == 0) ((__global float*) a)[-1] = 0.0f;          /* writes before the start of an input */
#endif
}
"""


def arguments(n=4096):
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    return [np.zeros(n, np.float32), a, b, np.int32(n)], [a + b, None, None, None]


def test_a_large_argument_is_spilled_to_a_file_once_and_the_problem_keeps_its_key(monkeypatch):
    args, answer = arguments()
    cfg = kernel_config("add", SOURCE, 4096, args, {"block_size_x": [64], "MODE": [0]}, answer=answer)
    problem = cfg.problem
    monkeypatch.setattr(shipping, "SPILL_BYTES", 4096 * 4)
    sent = shipping.spilled(problem)
    assert sent is not problem and sent.key == problem.key
    paths = [a.fill for a in sent.args if isinstance(a.fill, str)]
    assert len(paths) == 3 and all(p.endswith(".npy") for p in paths)  # c, a and b; n is a scalar
    for arg, path in zip(sent.buffers, paths):
        np.testing.assert_array_equal(np.load(path), args[[x.name for x in problem.args].index(arg.name)])
    # what the worker fills its buffers from: the same contents, mapped
    host = sent.host_arrays(0)
    np.testing.assert_array_equal(host["a"], args[1])
    assert isinstance(host["a"].base, np.memmap) or isinstance(host["a"], np.memmap)
    again = shipping.spilled(problem)
    assert [a.fill for a in again.args if isinstance(a.fill, str)] == paths  # written once
    monkeypatch.setattr(shipping, "SPILL_BYTES", 4096 * 4 + 1)
    assert shipping.spilled(problem) is problem  # smaller than the threshold: sent as it is
    # a file lives as long as its array (the registry keeps the latest problem of a kernel name,
    # so the check is made on a copy with arrays of its own)
    fresh = dataclasses.replace(problem, args=tuple(
        dataclasses.replace(a, fill=a.fill.copy()) if isinstance(a.fill, np.ndarray) else a for a in problem.args))
    monkeypatch.setattr(shipping, "SPILL_BYTES", 1)
    spilled_fresh = shipping.spilled(fresh)
    files = [a.fill for a in spilled_fresh.args if isinstance(a.fill, str)]
    assert len(files) == 3 and all(os.path.exists(f) for f in files) and not set(files) & set(paths)
    del fresh, spilled_fresh
    gc.collect()
    assert not any(os.path.exists(f) for f in files)
    assert all(os.path.exists(p) for p in paths)  # the registered problem's arrays are alive

def test_spilled_arguments_tune_to_the_same_rows_and_input_guards_still_catch_writes(monkeypatch):
    monkeypatch.setattr(shipping, "SPILL_BYTES", 1)  # every array through a file
    args, answer = arguments()
    df, _ = cltune.tune_kernel("add", SOURCE, 4096, args, {"block_size_x": [64], "MODE": [0, 1, 2]},
                               answer=answer)
    status = {m: (s, e) for m, s, e in zip(df["MODE"], df["status"], df["error"])}
    assert status[0][0] == "ok", status
    assert status[1] == ("out_of_bounds", "argument b: 4 guard byte(s) written after its end"), status
    assert status[2] == ("out_of_bounds", "argument a: 4 guard byte(s) written before its start"), status
    np.testing.assert_array_equal(args[0], 0)  # the caller's arrays untouched


def test_spill_folders_of_ended_processes_are_removed_and_live_ones_kept(tmp_path):
    # Bug guarded: a script killed by a signal (no atexit) left its spilled arrays in /tmp, 3 GB
    # for Kernel Tuner's reduction example, one folder per run, never removed.
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = tmp_path / f"cltune-spill-{ended.pid}-abc"
    live = tmp_path / f"cltune-spill-{os.getpid()}-def"
    other = tmp_path / "cltune-spill-notapid"
    for d in (dead, live, other):
        d.mkdir()
        (d / "x.npy").write_bytes(b"0" * 16)
    shipping.sweep_stale(str(tmp_path))
    assert not dead.exists() and live.exists() and other.exists()
