"""`python -m cltune`: the same as the `cltune` command."""

from .cli import main

main(prog_name="cltune")
