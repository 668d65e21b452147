"""The `cltune` command: click commands that parse, call the library and print. Empty on purpose:
`cltune.cli.entry` starts a sweep's worker before any of the commands is imported."""
