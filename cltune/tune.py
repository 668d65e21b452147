"""`cltune.tune` as scripts written before the package had folders import it (the Kernel Tuner
harness in shared/peers among them): the same module object as `cltune.drive.tune`."""

import sys

from .drive import tune as _module

sys.modules[__name__] = _module
