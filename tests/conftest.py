"""Shared fixtures: one Runner on the test device (CLTUNE_DEVICE, else the first GPU, else PoCL)."""

import pytest


@pytest.fixture(scope="session")
def runner():
    from cltune.measure import Runner

    return Runner(rtol=1e-4, atol=1e-4)
