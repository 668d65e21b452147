"""`cltune.tune` as scripts written before the package had folders import it (the Kernel Tuner
harness in shared/peers among them): the same module object as `cltune.search.tune`."""

import sys

from .search import tune as _module

sys.modules[__name__] = _module
