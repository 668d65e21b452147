"""A fake measuring backend: deterministic costs from the knob values, no device, milliseconds."""

from dataclasses import dataclass, field, replace

from cltune.core.device_info import DeviceInfo
from cltune.core.records import Measurement, Round, Status
from cltune.measure.protocol import Capabilities

FAKE_INFO = DeviceInfo(
    index=0, name="Fake GPU", platform="Fake Platform", platform_version="OpenCL 1.2", vendor="fake",
    type="GPU", version="OpenCL 1.2", driver="1.0", opencl_c="OpenCL C 1.2", compute_units=4,
    max_clock_mhz=800, global_mem_bytes=1 << 30, max_alloc_bytes=1 << 28, local_mem_bytes=32768,
    local_mem_type="GLOBAL", max_work_group_size=256, max_work_item_sizes=(256, 256, 256),
    preferred_vector_width_float=4, native_vector_width_float=4, profiling_resolution_ns=1000)

# The two PoCL runtimes of one Zen 4 machine: both report a preferred float width of 16, the
# HSTR in CL_DEVICE_VERSION tells AVX-512 code from AVX2 code.
POCL_AVX512 = replace(FAKE_INFO, name="pthread-skylake-avx512-AMD EPYC", type="ALL | CPU",
                      platform="Portable Computing Language", driver="3.1+debian", compute_units=2,
                      version="OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512",
                      target="pthread-x86_64-pc-linux-gnu-skylake-avx512",
                      max_work_group_size=4096, max_work_item_sizes=(4096, 4096, 4096),
                      preferred_vector_width_float=16, native_vector_width_float=16)
POCL_AVX2 = replace(POCL_AVX512, name="pthread-AMD EPYC", driver="3.0-rc2",
                    version="OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3",
                    target="pthread-x86_64-unknown-linux-gnu-znver3")
MALI_T860 = replace(FAKE_INFO, name="Mali-T860", vendor="ARM", preferred_vector_width_float=4)


def _rounds(runs: list) -> tuple:
    return tuple(Round(0.01, 0.02, t, t + 0.03) for t in runs)


def fake_cost(values: dict) -> float:
    """A made-up landscape: lower UNROLL/MATH choices and a middling local size are faster."""
    cost = 10.0 - 2.0 * values.get("MACROS", 0) / 4 - values.get("UNROLL", 0)
    cost += abs(values.get("LWS_X", 0) - 4) * 0.3 + 0.5 * (values.get("MATH", "plain") == "fma")
    return round(cost, 6)


@dataclass
class FakeBackend:
    """Records what it was asked to measure; fails the settings listed in `fail`."""

    caps = Capabilities(windows=True, timeout=True)
    info: DeviceInfo = FAKE_INFO
    fail: dict = field(default_factory=dict)  # params json -> Status
    measured: list = field(default_factory=list)
    interleaved: list = field(default_factory=list)
    timeout_s: float | None = None
    jitter: tuple = (1.0,)  # each launch's time is the cost times the next of these, in turn
    more: list = field(default_factory=list)  # the settings of each measure_more call
    slow_first: tuple = ()  # settings (names) whose first window runs in a slow phase: 2x launches

    def _launch(self, setting, timing, runs: list, slow: bool = False) -> list:
        cost = fake_cost(setting.values)
        while len(runs) < timing.wanted(runs):  # the Runner's repeat rule, adaptive included
            runs.append(cost * self.jitter[len(runs) % len(self.jitter)] * (2.0 if slow else 1.0))
        return runs

    def measure(self, problem, setting, timing, upcoming=()):
        self.measured.append(setting)
        status = self.fail.get(setting.params_json)
        if status is not None:
            return Measurement(setting=setting, status=status, error=f"fake {status}")
        cost = fake_cost(setting.values)
        runs = self._launch(setting, timing, [], setting.name in self.slow_first)
        return Measurement(setting=setting, status=Status.OK, build_options="-cl-std=CL1.2",
                           source_hash="fake", build_ms=1.0, first_launch_ms=cost, max_abs_err=0.0,
                           rounds=_rounds(runs), wall_ms=cost * (len(runs) + 1),
                           stopped_early=timing.stops_early(runs), verification_timed=timing.time_verification)

    def measure_more(self, problem, firsts, timing):
        self.more.append([m.setting for m in firsts])
        out = []
        for m in firsts:
            prior = [r.run_ms for r in m.rounds]
            runs = self._launch(m.setting, timing.window_timing(prior, m.windows), list(prior))
            rounds = timing.second_window(m.rounds, _rounds(runs)) if m.verification_timed else _rounds(runs)
            out.append(replace(m, rounds=rounds, stopped_early=timing.stops_early(runs), verification_timed=False,
                               windows=m.windows + 1))
        return out

    def measure_interleaved(self, problem, settings, timing):
        self.interleaved.append(list(settings))
        return [self.measure(problem, s, timing) for s in settings]

    def close(self):
        pass
