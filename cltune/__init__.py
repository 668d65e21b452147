"""cltune: tune OpenCL conv2d kernels for small GPUs (Mali T860 class) and PoCL."""

__version__ = "0.1.0"

from .api import best_setting, conv2d, settings  # noqa: E402

__all__ = ["__version__", "best_setting", "conv2d", "settings"]
