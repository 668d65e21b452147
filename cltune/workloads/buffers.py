"""Device buffers a family keeps beside the problem's: repacked weights and scratch space."""

from __future__ import annotations


def cached(bufs, key, make):
    """bufs.cache[key], made by make() the first time: repacked weights and scratch buffers live as
    long as the problem's buffers, so they are built once per problem, not per measurement."""
    if key not in bufs.cache:
        bufs.cache[key] = make()
    return bufs.cache[key]


def upload(ctx, host):
    """A read-only device buffer holding a copy of the host array (repacked weights, a zero bias)."""
    import pyopencl as cl  # only here: the family registry itself needs no OpenCL

    return cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)


def scratch(ctx, bufs, key, nbytes: int):
    """A read-write device buffer of at least nbytes, kept under key in bufs.cache, or in bufs.shared
    where a network's layers share one pool (net/end_to_end.layer_data): its layers run one after
    another on one in-order queue, so one layer's scratch is free again when the next one starts,
    and a pool the size of the largest layer's stays in the caches where one buffer a layer would not."""
    pool = bufs.cache if getattr(bufs, "shared", None) is None else bufs.shared
    old = pool.get(key)
    if old is None or old.size < nbytes:
        import pyopencl as cl  # pyopencl (0.7 s): only where this process opens a device

        pool[key] = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, max(4, nbytes))
    return pool[key]
