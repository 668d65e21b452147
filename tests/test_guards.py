"""Guard rails before launch: what the device cannot hold is refused with the limit named."""

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting


def test_local_size_over_the_device_limit_is_invalid_with_the_limit_named(runner):
    problem = Problem.from_shapes((1, 2, 6, 6), (2, 2, 3, 3), padding=1)
    big = runner.info.max_work_group_size
    m = runner.measure(problem, Setting.make("huge", "conv2d", {"LWS_X": big, "LWS_Y": 2, "LWS_Z": 1}),
                       Timing(0, 1))
    assert m.status == Status.INVALID
    assert f"work-group of {2 * big} > device max work-group size {big}" in m.error


def test_local_size_over_a_dimension_limit_is_invalid(runner):
    problem = Problem.from_shapes((1, 2, 6, 6), (2, 2, 3, 3), padding=1)
    limit = runner.info.max_work_item_sizes[2]
    m = runner.measure(problem, Setting.make("deep", "conv2d", {"LWS_X": 1, "LWS_Y": 1, "LWS_Z": limit + 1}),
                       Timing(0, 1))
    assert m.status == Status.INVALID and f"> max work-item size {limit}" in m.error


def test_buffers_larger_than_the_max_allocation_are_refused_before_allocating(runner):
    side = int((runner.info.max_alloc_bytes / 4) ** 0.5) + 64
    problem = Problem.from_shapes((1, 1, side, side), (1, 1, 1, 1))
    with pytest.raises(UserError, match=r"input \[1, 1, \d+, \d+\] needs \d+ bytes, more than the device's max allocation"):
        runner.load_problem(problem)


def test_oversized_problem_in_a_config_is_one_line_from_the_worker(tmp_path, runner):
    side = int((runner.info.max_alloc_bytes / 4) ** 0.5) + 64
    cfg = tmp_path / "huge.toml"
    cfg.write_text(f"[problem]\ninput = [1, 1, {side}, {side}]\nweight = [1, 1, 1, 1]\n[[setting]]\nname = 'n'\n")
    res = CliRunner().invoke(main, ["sweep", str(cfg), "--device", str(runner.info.index),
                                    "--out", str(tmp_path / "h.csv")])  # the device whose limit sized it
    assert res.exit_code == 2 and "more than the device's max allocation" in res.output, (res.output, res.exception)
    assert "Traceback" not in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.toml"]  # no header-only CSV, no .device.json
