"""The Python APIs: `conv2d` (torch.nn.functional.conv2d's arguments, run by an OpenCL setting),
`settings`, `best_setting` (conv.py), and `tune_kernel`, `kernel_config` (a kernel of your own tuned
from Python: kernel.py). `cltune.kernel_tuner` is Kernel Tuner's own surface over `kernel_config`."""

from .conv import best_setting, conv2d, settings
from .kernel import kernel_config, tune_kernel

__all__ = ["best_setting", "conv2d", "kernel_config", "settings", "tune_kernel"]
