"""The Gluon names the Hopper kernels call, found by feature in the installed triton (3.6 to 3.9), so that one
source compiles on each. Gluon renames its API between releases:

- warpgroup barrier: `gl.thread_barrier()` until 3.7, `gl.barrier()` from 3.8 (thread_barrier removed);
- TMA copies: `tma.async_copy_global_to_shared` / `async_copy_shared_to_global` until 3.7, `tma.async_load` /
  `async_store` from 3.8 (3.8 keeps the old names as aliases, 3.9 keeps them only to raise).

Each name is looked up once, at import (an attribute lookup: no work, no environment change). The kernels call
them as `compat.NAME(...)`, an attribute of an imported module, which the JIT resolves like `tma.NAME`.
kernels/common/versions.py holds the same facts by version for dispatch and explain (which import no triton), and
tests/test_versions.py checks that the two agree on the installed triton.
"""
from triton.experimental.gluon import language as _gl
from triton.experimental.gluon.language.nvidia.hopper import tma as _tma

from .versions import holds as _holds

# the new name where it exists (3.9 keeps the old ones as functions that raise)
barrier = _gl.barrier if hasattr(_gl, "barrier") else _gl.thread_barrier
async_load = _tma.async_load if hasattr(_tma, "async_load") else _tma.async_copy_global_to_shared
async_store = _tma.async_store if hasattr(_tma, "async_store") else _tma.async_copy_shared_to_global

# How a release orders a reduction shows in no attribute, so it is the version fact (kernels/common/versions.py, the one
# source explain names), read for the triton imported here: where it adds a thread's values in order, the head sums
# are plain gl.sum of products (mqa_kernels.common.gluon_heads).
in_order_reduce = _holds("in_order_reduce")  # (versions.installed(): the imported triton's version)


def api() -> dict:
    """{name the kernels call: the installed triton's name for it}: what tests and `explain --json` compare with
    the version facts."""
    return {"barrier": barrier.__name__, "async_load": async_load.__name__, "async_store": async_store.__name__}
