"""Kernel Tuner's observers (`kernel_tuner.observers.nvml`, ...) measure power, energy and clocks
through NVIDIA's NVML or vendor tools beside its CUDA/HIP backends. cltune tunes OpenCL and records
kernel time, build and verification only: an observer is refused in one line when it is made."""


class ObserverNotSupported:
    """Base of the observer names a Kernel Tuner script imports: making one raises at once."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: Kernel Tuner's observers need its CUDA/HIP backends "
                                  "(NVML, power sensors); cltune.kernel_tuner records kernel time only")
