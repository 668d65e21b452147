"""`cltune deploy` (tuned settings as a C header and a JSON tuning file) and `cltune reference` (a
problem's inputs and expected output for a C program to check itself against): parse, call, print."""

from __future__ import annotations

import click

from .base import main


@main.command()
@click.argument("results_files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--db", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Read the best-config database instead of RESULTS (alone: $CLTUNE_HOME/cltune.sqlite).")
@click.option("--kernel", default=None, help="The kernel family to deploy (needed when the input holds several).")
@click.option("--name", default=None,
              help="C name of the outputs and symbols: cltune_<name>.h, cltune_<name>_lookup (default: the kernel).")
@click.option("--shape", "shapes", multiple=True, metavar="KEY",
              help="A problem key the app runs besides the tuned ones (repeatable): it gets the nearest "
                   "tuned shape's setting, its options made for it.")
@click.option("--max-distance", type=click.FloatRange(min=0), default=4.0, show_default=True,
              help="How far a --shape may be from a tuned shape (docs/deploy.md).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A kernel of your own: its [kernel] config, for each setting's launch sizes and arguments.")
@click.option("--out", "-o", "out_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Folder of cltune_<name>.h, .json and .tsv (replaced; measured data there is refused).")
def deploy(results_files, db, kernel, name, shapes, max_distance, config, out_dir):
    """Write the tuned settings of RESULTS files (cltune results CSV or Kernel Tuner results JSON) or
    of the best-config database as a C header and a JSON tuning file: per device and shape the
    setting's build options and launches, and a default for devices nobody tuned."""
    from ..deploy.export import deploy as run

    paths, dep = run(list(results_files), db, kernel, name, list(shapes), max_distance, out_dir, config)
    for d in dep["devices"]:
        click.echo(f"{d['device']} ({d['driver']}):")
        for e in d["entries"]:
            via = f" from {e['tuned_problem']}" if e["match"] == "nearest" else ""
            click.echo(f"  {e['problem']}: {e['setting']} ({e['match']}{via})")
    click.echo(f"default ({dep['default']['rule']}): "
               + ", ".join(sorted({e['setting'] for e in dep['default']['entries']})))
    click.echo("wrote " + ", ".join(str(p) for p in paths.values()))


@main.command()
@click.argument("problem")
@click.option("--out", "-o", type=click.Path(dir_okay=False), required=True, help="The reference file (replaced).")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True, help="Seed of the inputs.")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-4, show_default=True)
@click.option("--atol", type=click.FloatRange(min=0), default=1e-4, show_default=True)
def reference(problem, out, seed, rtol, atol):
    """Write PROBLEM's (a conv problem key, or a config .toml with a [kernel] table: a kernel of your
    own, its tolerances the config's) inputs and expected output as a text file a C program checks its
    answer against (docs/deploy.md#the-reference-file)."""
    from ..deploy.reference import reference_text
    from ..deploy.tuning_json import write_all
    from ..results.guard import check_output

    is_config = problem.endswith(".toml")
    path = check_output(out, [problem] if is_config else [])
    if is_config:
        from ..deploy.kernel_reference import kernel_reference_text

        text = kernel_reference_text(problem, seed)
    else:
        text = reference_text(problem, seed, rtol, atol)
    write_all({path: text})
    click.echo(f"wrote {path}")
