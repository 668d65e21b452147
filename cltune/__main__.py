"""`python -m cltune`: the same as the `cltune` command."""

from .cli.entry import main

main()
