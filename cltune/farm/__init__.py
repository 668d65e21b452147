"""The farm: many machines' devices measured over Dask, one results file per device kind. Its
backend stands where measure/'s do (the chooser opens it for a `farm:` spec); its per-kind sweep
drives drive/tune.run once per kind."""
