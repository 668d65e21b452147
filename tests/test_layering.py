"""Which modules may import what: the config side of the house loads and checks every config
without OpenCL, so a machine without a driver can still validate sweep files; the folders stay
a pipeline (no module imports one that imports it back, function-level imports included) of
modules a person can read in a sitting."""

import subprocess
import sys
from pathlib import Path


def python(code: str) -> subprocess.CompletedProcess:
    """A fresh interpreter running `code`, which must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


CONFIGS = sorted(p.stem for p in (Path(__file__).parent.parent / "configs").glob("*.toml"))


def test_configs_load_and_families_register_with_pyopencl_hidden():
    # The bug: workloads/gemm.py imported pyopencl at the top, so loading any config that named
    # a GEMM family (or listing the built-in settings) needed an OpenCL driver.
    code = (
        "import sys; sys.modules['pyopencl'] = None\n"
        "import cltune.loader.config as c, cltune.workloads as w\n"
        f"for name in {CONFIGS!r}: c.load(name)\n"
        "assert 'implicit_gemm_cpu' in w.builtin_settings()\n"
        "for name in sorted(w.FAMILIES): w.get_family(name).source_hash()\n"
        "assert 'pyopencl' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')\n")
    out = python(code)
    assert out.stdout.strip() == "ok"


def test_builtin_settings_list_in_the_registration_order_whatever_was_imported_first():
    code = ("import cltune.workloads.depthwise, cltune.workloads.winograd\n"
            "from cltune.workloads import builtin_settings\n"
            "print(list(dict.fromkeys(fam for fam, _ in builtin_settings().values())))")
    out = python(code)
    assert out.stdout.split("[")[1].startswith("'conv2d', 'direct', 'im2col_gemm', 'implicit_gemm', "
                                                "'winograd', 'depthwise'")


def test_command_modules_import_the_shared_base_not_each_other():
    # The bug: the flat package's cli.py and cli_report.py imported each other (the package's only import cycle).
    code = ("import sys\n"
            "import cltune.cli.report, cltune.cli.farm, cltune.cli.net\n"
            "assert 'cltune.cli.commands' not in sys.modules, 'a command module imports commands.py'\n"
            "import cltune.cli.commands\n"
            "names = set(cltune.cli.commands.main.commands)\n"
            "assert {'sweep', 'report', 'plot', 'worker', 'net'} <= names, names\n"
            "print('ok')\n")
    assert python(code).stdout.strip() == "ok"


def graph():
    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    try:
        import import_graph
    finally:
        sys.path.pop(0)
    return import_graph.scan()


def test_no_module_imports_one_that_imports_it_back():
    """Guards against the cycles the flat package had (farm <-> farm_backend <-> farm_worker,
    device_values <-> space, workloads <-> diagonalwise, ...): function-level imports count too."""
    assert graph().cycles() == []


def test_no_two_folders_import_each_other():
    """The folders' floors are a ladder: the last two back-references (loader.config ->
    search.strategies while the drivers sat in search/, core.space -> workloads) are gone, and a new
    one fails here rather than hiding in a shared floor."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    try:
        import import_graph
    finally:
        sys.path.pop(0)
    levels, back = import_graph.floors(import_graph.scan())
    assert back == [] and not [f for floor in levels for f in floor if " + " in f], (levels, back)


def test_every_module_is_under_300_lines():
    big = {m: n for m, n in graph().modules.items() if n > 300}
    assert not big, big


def test_the_folders_are_the_pipeline():
    """core is imported by every stage and imports none; the strategies import only core; the CLI is
    imported by nothing but its own entry; measuring does not reach up into the search, the drivers,
    the results, the reports or the farm; the config loader reads into core's values and checks names
    against the registries (families, strategies), nothing above; the drivers reach no application."""
    g = graph()
    apps = ("cltune.cli", "cltune.bench", "cltune.net", "cltune.deploy", "cltune.kernel_tuner", "cltune.api")
    stages = ("cltune.loader", "cltune.search", "cltune.drive", "cltune.measure", "cltune.farm", "cltune.results",
              "cltune.report")
    up = {"cltune.core": ("cltune.workloads", *stages, *apps),
          # strategies are pure: what to measure next, from the space and the costs they are given
          "cltune.search": tuple(s for s in ("cltune.workloads", *stages, *apps) if s != "cltune.search"),
          "cltune.loader": ("cltune.drive", "cltune.measure", "cltune.farm", "cltune.results", "cltune.report", *apps),
          "cltune.measure": ("cltune.loader", "cltune.search", "cltune.drive", "cltune.farm", "cltune.results",
                             "cltune.report", *apps),
          "cltune.drive": ("cltune.farm", "cltune.report", *apps),
          "cltune.farm": ("cltune.report", *apps)}
    # A space asks its family whether it can run a point through the registry's lookup it was built
    # with (Space.families), not by importing the registry.
    wrong = [(a, b) for a, b in g.arrows() for src, banned in up.items()
             if a.startswith(src + ".") and b.startswith(banned)]
    assert not wrong, wrong
    into_cli = [(a, b) for a, b in g.arrows() if b.startswith("cltune.cli.") and not a.startswith("cltune.cli")
                and a != "cltune.__main__"]
    assert not into_cli, into_cli
