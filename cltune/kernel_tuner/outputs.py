"""run_kernel's result: one launch of one setting on an in-process device, and every argument
after it, as Kernel Tuner returns them (buffers as new arrays of their dtype and layout, scalars
as given)."""

from __future__ import annotations

from ..loader.bind import bind_config


def after_one_launch(backend, cfg, arguments) -> list:
    """Launch the config's one setting once on `backend` (in_process) with the arguments' own
    contents, and read every buffer back."""
    cfg = bind_config(cfg, backend.info)
    problem, space = cfg.problem, cfg.spaces[0]
    setting = space.setting({k: values[0] for k, values in space.params})
    backend.load_problem(problem, reference=False)
    backend.data.before_verification(backend.queue)  # the arguments' contents, as given
    backend.run_once(problem, setting)
    after = backend.data.arguments_now(backend.queue)
    out = []
    for arg, a in zip(arguments, problem.args):
        out.append(after[a.name] if a.kind == "buffer" else arg)
    return out

