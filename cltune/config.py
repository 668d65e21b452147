"""`cltune.config` as scripts written before the package had folders import it (the Kernel Tuner
harness in shared/peers among them): the same module object as `cltune.loader.config`."""

import sys

from .loader import config as _module

sys.modules[__name__] = _module
