"""`from kernel_tuner.observers.nvml import NVMLObserver`, made refusable here (see the package's doc)."""

from . import ObserverNotSupported


class NVMLObserver(ObserverNotSupported):
    """NVIDIA's NVML power, energy and clock observer: refused when made."""


class NVMLPowerObserver(ObserverNotSupported):
    """NVML's continuous power observer: refused when made."""
