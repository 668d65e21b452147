"""The drivers: one loop (`sweep.Sweep`) that measures what a strategy asks for into one results file
(`session`), the sweep of a config (`tune.run`), and a recorded space replayed as a device (`replay`)."""
