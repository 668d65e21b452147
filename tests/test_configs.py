"""Every bundled config loads, and each of its spaces leaves something to measure."""

import pytest

from cltune.loader import bind, config
from cltune.core.paths import data_dir
from tests.fakes import MALI_T860, POCL_AVX2, POCL_AVX512

CONFIGS = sorted(p.stem for p in data_dir("configs").glob("*.toml"))


@pytest.mark.parametrize("info", [POCL_AVX512, POCL_AVX2, MALI_T860], ids=["avx512", "avx2", "mali"])
@pytest.mark.parametrize("name", CONFIGS)
def test_bundled_config_loads_and_its_spaces_are_not_empty(name, info):
    # A knob renamed in a family, or a constraint that rules out everything on some device's
    # vector width, would rot a config.
    cfg = bind.bind_config(config.load(name), info)
    problems = [p for _, _, p in cfg.layers] or [cfg.problem]
    for space in cfg.spaces:
        # The first valid point is enough: listing every one of a large space took 10-14 s.
        assert any(next(space.iter_valid(p, info), None) for p in problems), f"{name}: space {space.family} is empty"
    assert cfg.settings or cfg.spaces


def test_an_unknown_key_holding_a_newline_is_reported_on_one_line():
    # Found by test_properties: a quoted TOML key "\n" split the error message over two lines.
    from cltune.core.errors import UserError

    with pytest.raises(UserError) as err:
        config.parse({"problem": {"\n": None}}, "prop.toml")
    assert str(err.value).startswith("prop.toml: problem.'\\n': unknown key") and "\n" not in str(err.value)
