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
    """A read-write device buffer of at least nbytes, kept in bufs.cache under key."""
    old = bufs.cache.get(key)
    if old is None or old.size < nbytes:
        import pyopencl as cl  # pyopencl (0.7 s): only where this process opens a device

        bufs.cache[key] = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, max(4, nbytes))
    return bufs.cache[key]
