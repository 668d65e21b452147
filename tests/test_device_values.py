"""device.* values: spaces, constraints and built-in CPU settings derived from the device (fakes, no
OpenCL), so a config tuned on one machine does not carry that machine's vector width to another."""

from dataclasses import replace

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core import device_values
from cltune.loader import bind, config
from cltune.core.errors import UserError
from cltune.core.space import Setting
from cltune.workloads import builtin_settings, get_family
from tests.conftest import measure_each, skip_wide_vectors
from tests.fakes import FAKE_INFO, MALI_T860, POCL_AVX2, POCL_AVX512


def test_register_width_comes_from_the_target_not_the_preferred_width():
    # Both PoCL runtimes report a preferred float width of 16; only one emits AVX-512 code.
    assert POCL_AVX512.preferred_vector_width_float == POCL_AVX2.preferred_vector_width_float == 16
    v512, v256 = device_values.values(POCL_AVX512), device_values.values(POCL_AVX2)
    assert (v512["device.vector_width"], v512["device.vector_registers"]) == (16, 32)
    assert (v256["device.vector_width"], v256["device.vector_registers"]) == (8, 16)
    assert device_values.values(MALI_T860)["device.vector_width"] == 4
    assert device_values.values(FAKE_INFO)["device.vector_width"] == 4  # a GPU: its preferred width
    assert v512["device.vector_widths"] == [8, 16] and v256["device.vector_widths"] == [4, 8]


def test_the_runtime_target_field_decides_the_register_width():
    # A runtime whose name says nothing: the target recorded by device discovery decides.

    info = replace(POCL_AVX2, name="pthread-AMD EPYC", version="OpenCL 3.0 PoCL",
                   target="pthread-x86_64-unknown-linux-gnu-znver4")
    assert device_values.register_bits(info) == 512


def test_builtin_cpu_settings_follow_the_vector_width():
    """The bug: direct_cpu / *_gemm_cpu were float8 everywhere, AVX2 choices on an AVX-512 device."""
    family, params = builtin_settings()["direct_cpu"]
    s = Setting.make("direct_cpu", family, params)
    wide, narrow = (device_values.bind_setting(s, i).values for i in (POCL_AVX512, POCL_AVX2))
    assert (wide["VEC"], wide["BLOCK_K"]) == (16, 32) and (narrow["VEC"], narrow["BLOCK_K"]) == (8, 16)
    for name in ("implicit_gemm_cpu", "im2col_gemm_cpu", "implicit_gemm_1x1_cpu", "winograd4x4"):
        family, params = builtin_settings()[name]
        for info, vw in ((POCL_AVX512, 16), (POCL_AVX2, 8)):
            bound = device_values.bind_setting(Setting.make(name, family, params), info).values
            assert bound["VW"] == vw
            get_family(family).resolve(bound)  # every bound value is one the knob accepts
    family, params = builtin_settings()["implicit_gemm_1x1_cpu"]
    tiles = [(b["TM"], b["TN"]) for b in (device_values.bind_setting(Setting.make("x", family, params), i).values
                                         for i in (POCL_AVX512, POCL_AVX2))]
    assert tiles == [(8, 16), (4, 16)]
    # implicit_gemm_cpu's 7-pixel tile (2 x 7 accumulators) fits AVX-512's 32 registers; on AVX2's 16
    # it would spill beside the 2 weight vectors, so there the tile stays 6 pixels
    family, params = builtin_settings()["implicit_gemm_cpu"]
    tiles = [(b["TM"], b["TN"], b["LWS_X"], b["LWS_Y"]) for b in (
        device_values.bind_setting(Setting.make("x", family, params), i).values for i in (POCL_AVX512, POCL_AVX2))]
    assert tiles == [(32, 7, 2, 1), (16, 6, 2, 1)]


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_every_builtin_binds_to_values_its_knobs_accept_at_any_width(width):
    # A GPU that asks for float1 (or float2) must get runnable built-ins too, not a bind error.

    gpu = replace(FAKE_INFO, preferred_vector_width_float=width)
    for name, (family, params) in builtin_settings().items():
        bound = device_values.bind_setting(Setting.make(name, family, params), gpu)
        get_family(family).resolve(bound.values)


def test_bench_suite_binds_to_different_spaces_per_device():
    cfg = config.load("bench_suite")
    assert bind.needs_device(cfg)
    wide = bind.bind_config(cfg, POCL_AVX512)
    narrow = bind.bind_config(cfg, POCL_AVX2)
    vw = {s.family: dict(s.params).get("VW", dict(s.params).get("VEC")) for s in wide.spaces}
    assert set(vw.values()) == {(16,)}
    assert {dict(s.params).get("VW", dict(s.params).get("VEC")) for s in narrow.spaces} == {(8,)}
    direct = {s.family: s for s in wide.spaces}["direct"]
    assert dict(direct.params)["BLOCK_K"] == (16, 32, 48)
    layer = cfg.layers[-1][2]  # mobilenet_pw_1024
    # AVX-512's 32 registers admit tiles that 16 do not
    big = {"BLOCK_K": 48, "BLOCK_W": 6, "BLOCK_H": 1, "VEC": 16, "WEIGHTS": "packed",
           "PADDING": "zeropad", "PIXELS": "linear"}
    assert direct.reject_reason(big, layer) is None
    narrow_direct = {s.family: s for s in narrow.spaces}["direct"]
    assert "fits_registers" in narrow_direct.reject_reason({**big, "BLOCK_K": 24, "VEC": 8}, layer)
    assert bind.bind_config(wide, POCL_AVX2) == wide  # binding twice is a no-op


def test_a_config_is_bound_once():
    # The bug: `cltune sweep` bound the config (to print the device and size its table), then
    # tune.run bound it again, resolving every value of every space through its family twice.
    cfg = config.load("bench_suite")
    wide = bind.bind_config(cfg, POCL_AVX512)
    assert cfg.device is None and wide.device == POCL_AVX512
    assert bind.bind_config(wide, POCL_AVX512) is wide


def test_an_unbound_space_refuses_to_enumerate():
    space = config.load("bench_suite").spaces[0]
    with pytest.raises(ValueError, match="bind it to a device"):
        space.valid_settings(config.load("bench_suite").problem)


def _toml(tmp_path, params: str, constraints: str = "") -> str:
    path = tmp_path / "c.toml"
    path.write_text(f"""[problem]
input = [1, 16, 8, 8]
weight = [32, 16, 3, 3]
padding = 1
[[space]]
family = "direct"
[space.params]
{params}
[space.constraints]
{constraints}
""")
    return str(path)


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(UserError, match=r"space\[0\]\.params\.VEC: unknown name\(s\) device\.nope"):
        config.load(_toml(tmp_path, 'VEC = ["device.nope"]'))
    with pytest.raises(UserError, match=r"constraints\.c: unknown name\(s\) device\.bogus"):
        config.load(_toml(tmp_path, "VEC = [4]", 'c = "VEC <= device.bogus"'))


def test_a_bound_value_the_knob_refuses_is_one_line(tmp_path):
    cfg = config.load(_toml(tmp_path, 'VEC = ["4 * device.vector_width"]'))  # 64 lanes on AVX-512
    with pytest.raises(UserError, match="VEC"):
        bind.bind_config(cfg, POCL_AVX512)


def test_settings_command_lists_different_spaces_on_two_devices(monkeypatch):
    import cltune.measure.device as device

    out = {}
    for info in (POCL_AVX512, POCL_AVX2):
        monkeypatch.setattr(device, "select", lambda spec, info=info: (None, info))
        res = CliRunner().invoke(main, ["settings", "bench_suite"])
        assert res.exit_code == 0, res.output
        out[info.name] = res.output
    wide, narrow = out[POCL_AVX512.name], out[POCL_AVX2.name]
    assert "512-bit vectors (16 floats) x 32 registers" in wide
    assert "VW = [16]" in wide and "VEC = [16]" in wide and "-DVEC=16" in wide
    assert "VW = [8]" in narrow and "VEC = [8]" in narrow and "-DVEC=8" in narrow
    spaces = lambda text: [line for line in text.splitlines() if line.startswith("space ")]  # noqa: E731
    assert spaces(wide) != spaces(narrow)


def test_settings_command_without_a_device_shows_the_references(monkeypatch):
    import cltune.measure.device as device

    def no_device(spec):
        raise UserError("no OpenCL platform found")
    monkeypatch.setattr(device, "select", no_device)
    res = CliRunner().invoke(main, ["settings", "bench_suite"])
    assert res.exit_code == 0, res.output
    assert "device.* values left unresolved: no OpenCL platform found" in res.output
    assert "VEC = ['device.vector_width']" in res.output


@pytest.mark.parametrize("info", [POCL_AVX512, POCL_AVX2], ids=["float16", "float8"])
def test_builtin_cpu_settings_at_either_width_match_the_reference(runner, info):
    """Whatever device runs the tests, the built-ins as an AVX-512 and an AVX2 device bind them
    (float16 and float8 register tiles) compute the float64 reference's answer."""
    from cltune.core.problem import Problem
    from cltune.core.records import Status, Timing

    if device_values.register_bits(info) == 512:
        skip_wide_vectors(runner, {"VW": 16})  # float16 tiles on a runtime that cannot compile them

    problem = Problem.from_shapes((1, 19, 9, 11), (37, 19, 3, 3), 1, 1)  # ragged against 16 and 32
    pointwise = Problem.from_shapes((1, 40, 7, 9), (36, 40, 1, 1))
    bound = [device_values.bind_setting(Setting.make(name, family, params), info)
             for name, (family, params) in builtin_settings().items()
             if any(device_values.is_ref(v) for v in params.values())]
    for p in (problem, pointwise):
        settings = [s for s in bound  # winograd: 3x3 stride 1 only
                    if not get_family(s.family).reject_reason(p, get_family(s.family).resolve(s.values), None)]
        for s, m in zip(settings, measure_each(runner, p, settings, Timing(warmup=0, repeat=1))):
            assert m.status == Status.OK, f"{s.name} {s.values}: {m.status} {m.error}"


def test_a_space_asks_its_family_through_the_lookup_it_was_built_with():
    # core/space.py imported the family registry (a floor up) to ask a family whether it can run a
    # point; the loader now gives each space the registry's lookup, and binding must keep it.
    cfg = config.load("bench_suite")
    space = bind.bind_config(cfg, POCL_AVX2).spaces[0]
    assert cfg.spaces[0].families is get_family and space.families is get_family
    layer = cfg.layers[-1][2]
    point = next(space.iter_valid(layer, POCL_AVX2)).values

    class Fussy:
        def resolve(self, values):
            return values

        def reject_reason(self, problem, values, device):
            return f"fussy about {sorted(values)[0]}"

    assert replace(space, families=lambda name: Fussy()).reject_reason(point, layer) == f"fussy about {sorted(point)[0]}"
    assert replace(space, families=None).reject_reason(point, layer) is None  # constraints and limits only


def test_the_depthwise_cpu_builtin_loads_vectors_where_pocl_inlines_vload():
    """Guards against one load scheme for every PoCL: vloadN is a call in PoCL 3.0 (2.6x slower on
    MobileNet v2's 112x112 depthwise layer) and a plain load in 3.1 (up to 1.6x faster there)."""
    old = replace(POCL_AVX512, platform_version="OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, LLVM 14.0.6")
    new = replace(POCL_AVX512, platform_version="OpenCL 3.0 PoCL 3.1+debian  Linux, LLVM 15.0.6")
    by_driver = replace(POCL_AVX512, platform_version="", driver="3.0-rc2")
    assert [device_values.values(i)["device.inline_vload"] for i in (old, new, by_driver, MALI_T860)] == [0, 1, 0, 1]
    family, params = builtin_settings()["depthwise_cpu"]
    loads = [bind.bind_setting(Setting.make("depthwise_cpu", family, params), i).values["LOAD"] for i in (old, new)]
    assert loads == [2, 1]


def test_weight_prefetch_is_on_for_a_cpu_only():
    """Guards the prefetch of the Winograd built-ins' GEMM (a network reads its weights from memory):
    on where the device is a CPU, 0 (no prefetch compiled) on a GPU."""
    assert [device_values.values(i)["device.cpu"] for i in (POCL_AVX512, POCL_AVX2, MALI_T860)] == [1, 1, 0]
    built = builtin_settings()
    for name, on in (("winograd4x4", 1024), ("winograd2x2", 1024)):
        family, params = built[name]
        got = [bind.bind_setting(Setting.make(name, family, params), i).values["PREFETCH"]
               for i in (POCL_AVX512, MALI_T860)]
        assert got == [on, 0], name
