"""`python -m cltune`: the same as the `cltune` command."""

from .entry import main

main()
