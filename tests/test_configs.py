"""Every bundled config loads, and each of its spaces leaves something to measure."""

import pytest

from cltune import config
from cltune.paths import data_dir

CONFIGS = sorted(p.stem for p in data_dir("configs").glob("*.toml"))


@pytest.mark.parametrize("name", CONFIGS)
def test_bundled_config_loads_and_its_spaces_are_not_empty(name):
    # A knob renamed in a family, or a constraint that rules out everything, would rot a config.
    cfg = config.load(name)
    problems = [p for _, _, p in cfg.layers] or [cfg.problem]
    for space in cfg.spaces:
        assert any(space.valid_settings(p) for p in problems), f"{name}: space {space.family} is empty"
    assert cfg.settings or cfg.spaces
