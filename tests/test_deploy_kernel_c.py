"""The deploy path for a kernel of your own, end to end as examples/deploy/README.md walks it: a sweep
of examples/deploy/deploy_sgemm.toml (examples/sgemm's SGEMM, three tilings) on the device a C program
sees, cltune deploy --config and cltune reference CONFIG.toml, deploy_kernel.c built with cc, and its
answer from the header, the flat tuning file and the default; another setting's options with the
first's launch sizes, or a corrupted reference, make it fail; a config of another problem is one line."""

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from tests.test_deploy_c import EXAMPLE, cli, c_device_name

CONFIG = EXAMPLE / "deploy_sgemm.toml"
SGEMM = EXAMPLE.parent / "sgemm"


def build(tmp: Path, include: Path, exe: str) -> Path:
    out = tmp / exe
    res = subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-pedantic", "-Werror", "-DCLTUNE_NAME=sgemm",
                          "-I", str(include), "-o", str(out), str(EXAMPLE / "deploy_kernel.c"),
                          str(EXAMPLE / "tuning_file.c"), "-lOpenCL", "-lm"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return out


def run(exe: Path, reference: Path, *args) -> tuple[int, str]:
    out = subprocess.run([str(exe), "--kernels", str(SGEMM), *map(str, args), str(reference)],
                         capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deploy_kernel")
    name = c_device_name(tmp)
    cli("sweep", CONFIG, "--device", name, "--out", tmp / "s.csv")
    cli("deploy", tmp / "s.csv", "--config", CONFIG, "-o", tmp / "out")
    cli("reference", CONFIG, "-o", tmp / "ref.txt")
    exe = build(tmp, tmp / "out", "deploy_kernel")
    return tmp, name, exe


def winner(tmp: Path) -> dict:
    """The device's entry, from the JSON."""
    return json.loads((tmp / "out" / "cltune_sgemm.json").read_text())["devices"][0]["entries"][0]


def setting(tmp: Path, name: str) -> dict:
    rows = pd.read_csv(tmp / "s.csv", dtype=str, keep_default_na=False)
    return rows[rows["setting"] == name].iloc[0].to_dict()


def test_the_tuned_setting_runs_with_its_options_and_sizes_and_gets_the_right_answer(app):
    tmp, name, exe = app
    won = winner(tmp)
    glob, local = won["launches"][0]["global"], won["launches"][0]["local"]
    p = won["params"]
    assert (glob, local) == ([64 * p["MDIMC"] // p["MWG"], 64 * p["NDIMC"] // p["NWG"]], [p["MDIMC"], p["NDIMC"]])
    rc, out = run(exe, tmp / "ref.txt")
    assert rc == 0 and f"device: {name}\n" in out and f"setting: {won['setting']} (exact, from cltune_sgemm.h)" in out
    assert f"options: {won['options']}\n" in out and f"global {glob[0]},{glob[1]} local {local[0]},{local[1]}" in out
    assert "answer: C: 4096 values match the reference" in out, out


def test_the_flat_tuning_file_and_an_unknown_devices_default_get_the_right_answer(app):
    tmp, _, exe = app
    rc, out = run(exe, tmp / "ref.txt", "--tuning", tmp / "out" / "cltune_sgemm.tsv", "--as-device", "Mali-T860")
    assert rc == 0 and "looked up as Mali-T860" in out and "(default, from" in out and "values match" in out, out


def test_another_settings_options_with_the_first_settings_sizes_fail(app):
    """The header's entry edited to setting `local`'s options (16 x 16 tiles) with setting `wide`'s
    launch sizes (16 x 16 work-items, for 32 x 32 tiles): a quarter of C is never written."""
    tmp, _, _ = app
    won, small, big = winner(tmp), setting(tmp, "local"), setting(tmp, "wide")
    dims = lambda g: f"{{{g[0]}, {g[1]}, 0}}"  # noqa: E731  (a launch's global size in the header)
    big_global = [64 * 8 // json.loads(big["params"])["MWG"], 64 * 8 // json.loads(big["params"])["NWG"]]
    header = (tmp / "out" / "cltune_sgemm.h").read_text()
    edited = header.replace(won["options"], small["build_options"]).replace(dims(won["launches"][0]["global"]),
                                                                            dims(big_global))
    bad = tmp / "bad"
    bad.mkdir(exist_ok=True)
    (bad / "cltune_sgemm.h").write_text(edited)
    rc, out = run(build(tmp, bad, "deploy_kernel_bad"), tmp / "ref.txt")
    assert rc == 1 and f"options: {small['build_options']}" in out and "global 16,16 local 8,8" in out, out
    assert "WRONG: C[" in out, out


def test_a_corrupted_reference_fails(app):
    tmp, _, exe = app
    lines = (tmp / "ref.txt").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("buffer C ")) + 4096 // 8 + 1
    lines[at] = " ".join(["123"] + lines[at].split()[1:])  # C's first expected value
    (tmp / "wrong.txt").write_text("\n".join(lines) + "\n")
    rc, out = run(exe, tmp / "wrong.txt")
    assert rc == 1 and "WRONG: C[0] =" in out and "expected 123" in out, out


def test_a_config_of_another_problem_or_without_a_kernel_is_one_line_and_writes_nothing(app, tmp_path):
    tmp, _, _ = app
    other = tmp_path / "other.toml"
    other.write_text(CONFIG.read_text().replace("M = 64, N = 64", "M = 32, N = 64")
                     .replace('"../sgemm/', f'"{SGEMM}/'))
    for config, says in ((other, "holds results of kernel_sgemm_M64_N64_K64_"),
                         (EXAMPLE / "deploy_small.toml", "has no [kernel] table")):
        res = CliRunner().invoke(main, ["deploy", str(tmp / "s.csv"), "--config", str(config), "-o", str(tmp_path / "o")])
        assert res.exit_code == 2 and says in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert not (tmp_path / "o").exists()


def test_a_settings_launch_is_evaluated_from_its_config_local_buffers_as_local_bytes():
    from cltune.deploy.user_kernel import load_problem, realize_kernel

    problem = load_problem(str(EXAMPLE.parent / "reduction" / "reduce.toml"))
    e = realize_kernel(problem, "s", {"WG": 64, "ITEMS": 4, "VW": 2})
    assert e["options"] == "-cl-std=CL1.2 -cl-kernel-arg-info -DITEMS=4 -DVW=2 -DWG=64"
    assert e["sources"] == ["reduce.cl"] and e["defines"] == {"ITEMS": "4", "VW": "2", "WG": "64"}
    assert e["launches"] == [{"kernel": "reduce", "global": [4194304 // 8], "local": [64],
                              "args": ["x", "result", "local:256", "4194304"]}]
