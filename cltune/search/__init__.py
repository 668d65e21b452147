"""What to measure next: the strategies, registered by name, and the `model` strategy's Gaussian
process. Pure functions of a `Search`; no device, no file (the drivers in drive/ run them)."""
