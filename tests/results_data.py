"""Results files for the plot, compare and report tests: one real PoCL sweep, one hand-made run."""

import pandas as pd
import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.results import rows as results

OTHER_DEVICE = "Mali-T860"


def make_other_run(a_path, out_path):
    """A second device's run of the same space, derived from a real one: run times in the reverse
    order (rank correlation -1 over the shared settings), `fma` missing, a setting `extra` that
    only it has, and `mad24` failing to build."""
    df = results.load(a_path)
    b = df[df["setting"] != "fma"].copy()
    b["device"], b["platform"], b["driver"] = OTHER_DEVICE, "ARM Platform", "1.10"
    ranks = b["run_ms_min"].rank(method="first")
    b["run_ms_min"] = (len(b) + 1 - ranks) * 2.0  # strictly reversed order
    b["run_ms_median"] = b["run_ms_min"]
    extra = b[b["setting"] == "normal"].assign(setting="extra")
    b = pd.concat([b, extra], ignore_index=True)
    b["error"] = b["error"].astype(object)
    bad = b["setting"] == "mad24"
    b.loc[bad, "status"], b.loc[bad, "error"] = "build_error", "error: boom"
    for col in [c for c in b.columns if c.endswith(("_median", "_min", "_max"))] + ["run_ms_samples"]:
        b[col] = b[col].astype(object)
        b.loc[bad, col] = None
    b.to_csv(out_path, index=False)
    return out_path


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory):
    """(real quick sweep on the test device, hand-made second device) as CSV paths."""
    d = tmp_path_factory.mktemp("runs")
    a = d / "quick.csv"
    res = CliRunner().invoke(main, ["sweep", "quick", "--out", str(a), "--repeat", "3", "--warmup", "0"])
    assert res.exit_code == 0, res.output
    return a, make_other_run(a, d / "other.csv")
