"""`cltune bench`: tune every family on a suite's layers, then race the winners against numpy and torch."""
