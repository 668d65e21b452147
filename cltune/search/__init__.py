"""What to measure next, and the one loop that measures it into a results file: strategies, the
sweep loop, and the session of a tuning (options, steps, re-ranking)."""
