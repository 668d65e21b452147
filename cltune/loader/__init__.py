"""The config loader: a TOML sweep file (or a [kernel] table) read, checked and turned into core's
values, above the registries it checks names against (kernel families, search strategies)."""
