"""The deploy path end to end, as examples/deploy/README.md walks it: a tiny sweep on the device a C
program sees, cltune deploy and cltune reference, the C99 example built with cc against the OpenCL
headers and ICD loader, and its answer for a tuned shape, an untuned one (nearest), an unknown device
(default), a second device whose winner is two launches, the flat tuning file, and a wrong answer."""

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from cltune.cli.commands import main

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "deploy"
TUNED = "n1_c4_h10_w10_k6_r3_s3_st1x1_p1x1_d1x1_g1"  # examples/deploy/deploy_small.toml's problem
UNTUNED = "n1_c8_h12_w12_k8_r3_s3_st1x1_p1x1_d1x1_g1"
MISSING = ("apt-get install opencl-c-headers ocl-icd-opencl-dev (scripts/system-deps installs them, so CI "
           "never skips)")

PROBE = r"""
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
int main(void) {
    cl_platform_id p; cl_device_id d; char name[256] = "";
    if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS)
        return 1;
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    printf("%s\n", name);
    return 0;
}
"""


def cli(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def c_device_name(tmp: Path) -> str:
    """The name of the first device the system's ICD loader gives a C program; skips (saying what
    to install) without cc or the OpenCL headers and loader."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc): " + MISSING)
    (tmp / "probe.c").write_text(PROBE)
    out = subprocess.run([cc, "-std=c99", "-o", str(tmp / "probe"), str(tmp / "probe.c"), "-lOpenCL"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"the OpenCL C headers or ICD loader are missing ({out.stderr.strip()[:120]}): {MISSING}")
    run = subprocess.run([str(tmp / "probe")], capture_output=True, text=True)
    assert run.returncode == 0, "the system's ICD loader finds no OpenCL device (is pocl-opencl-icd installed?)"
    return run.stdout.strip()


def other_device(csv: Path, out: Path) -> Path:
    """The sweep's first-pass rows as if measured on "Other GPU", where the SPLIT settings (two
    launches) won."""
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    df = df[df["phase"] != "rerank"].copy()
    df["device"] = "Other GPU"
    split = df["params"].str.contains('"SPLIT":1')
    df.loc[split, "run_ms_min"] = "0.001"
    df.to_csv(out, index=False)
    return out


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deploy")
    name = c_device_name(tmp)
    cli("sweep", EXAMPLE / "deploy_small.toml", "--device", name, "--out", tmp / "a.csv")
    other = other_device(tmp / "a.csv", tmp / "other.csv")
    cli("deploy", tmp / "a.csv", other, "--shape", UNTUNED, "-o", tmp / "out")
    for key in (TUNED, UNTUNED):
        cli("reference", key, "-o", tmp / f"{key}.txt")
    exe = tmp / "deploy_conv2d"
    build = subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I", str(tmp / "out"),
                            "-o", str(exe), str(EXAMPLE / "deploy_conv2d.c"), str(EXAMPLE / "tuning_file.c"),
                            "-lOpenCL", "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr

    def run(key, *args, reference=None):
        ref = reference or tmp / f"{key}.txt"
        out = subprocess.run([str(exe), "--kernels", str(ROOT / "kernels"), *args, str(ref)],
                             capture_output=True, text=True, timeout=120)
        return out.returncode, out.stdout + out.stderr

    run.tmp, run.name = tmp, name
    return run


def test_a_tuned_shape_runs_the_devices_winner_and_gets_the_right_answer(app):
    rc, out = app(TUNED)
    assert rc == 0 and f"device: {app.name}\n" in out and "(exact, from cltune_conv2d.h)" in out, out
    assert "answer: 600 outputs match the reference" in out


def test_an_untuned_shape_runs_the_nearest_tuned_shapes_setting(app):
    rc, out = app(UNTUNED)
    assert rc == 0 and f"(nearest of {TUNED}, from cltune_conv2d.h)" in out, out
    assert "answer: 1152 outputs match the reference" in out


def test_an_unknown_device_runs_the_default(app):
    rc, out = app(UNTUNED, "--as-device", "Mali-T860")
    assert rc == 0 and "looked up as Mali-T860" in out and "(default, from cltune_conv2d.h)" in out, out


def test_a_second_devices_winner_of_two_launches_runs_right(app):
    rc, out = app(TUNED, "--as-device", "Other GPU")
    assert rc == 0 and "SPLIT=1" in out and "(exact," in out and "outputs match" in out, out


def test_the_flat_tuning_file_gives_the_same_choice(app):
    rc, out = app(UNTUNED, "--tuning", app.tmp / "out" / "cltune_conv2d.tsv")
    assert rc == 0 and f"(nearest of {TUNED}, from {app.tmp / 'out' / 'cltune_conv2d.tsv'})" in out, out


def test_a_wrong_answer_exits_non_zero(app):
    text = (app.tmp / f"{TUNED}.txt").read_text().splitlines()
    y = text.index("y 600")
    text[y + 1] = " ".join(["9"] + text[y + 1].split()[1:])  # the first expected output made wrong
    bad = app.tmp / "wrong.txt"
    bad.write_text("\n".join(text) + "\n")
    rc, out = app(TUNED, reference=bad)
    assert rc == 1 and "WRONG: output[0] =" in out and "expected 9" in out, out
