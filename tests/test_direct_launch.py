"""mqa_cli.direct_launch on the CPU: triton 3.6's own launcher wrapper (CudaLauncher.__call__ around
wrap_handle_tensordesc's closure) built around a recording stand-in for the compiled C launcher. The direct call
must hand the C launcher exactly what the wrapper hands it, encode a descriptor only when it is not the one of the
call before, and give up (None) wherever the wrapper is not the one it knows."""
import pytest
import torch

driver = pytest.importorskip("triton.backends.nvidia.driver")
hopper = pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
from triton.experimental.gluon import language as gl  # noqa: E402

from mqa_cli import direct_launch  # noqa: E402

SIGNATURE = {"q_desc": "tensordesc<fp8e4nv[64, 128]>", "kv_desc": "tensordesc<fp8e4nv[64, 128]>", "w": "*fp32",
             "n": "i32", "out": "*fp32", "stride": "i32", "BLOCK": "constexpr"}


def _desc(rows: int):
    layout = gl.NVMMASharedLayout.get_default_for([64, 128], gl.float8e4nv)
    return hopper.TensorDescriptor(torch.empty(rows, 128, dtype=torch.float8_e4m3fn), [rows, 128],
                                   [128, 1], [64, 128], layout)


def _launcher(calls: list, scratch: int = 0):
    """A CudaLauncher as triton 3.6 builds it, its compiled C launcher replaced by a recorder."""
    run = object.__new__(driver.CudaLauncher)
    run.launch = driver.wrap_handle_tensordesc(lambda *a: calls.append(a), SIGNATURE, None)
    run.num_ctas, run.global_scratch_size, run.global_scratch_align = 1, scratch, 1
    run.profile_scratch_size, run.profile_scratch_align = 0, 1
    run.launch_cooperative_grid, run.launch_pdl = False, True
    return run


class Compiled:
    def __init__(self, run):
        self.run = run


def _args(q, kv):
    w, out = torch.empty(4, device="meta"), torch.empty(8, device="meta")
    return (q, kv, w, 7, out, 3, 64)


def test_the_direct_call_hands_the_launcher_what_triton_s_wrapper_hands_it():
    calls = []
    run = _launcher(calls)
    direct = direct_launch.unwrap(Compiled(run))
    assert direct is not None and [p for p, _ in direct.descs] == [0, 1]
    q, kv = _desc(100), _desc(300)
    args = _args(q, kv)
    run(2, 1, 1, 99, "fn", "packed", None, None, None, *args)
    direct(2, 1, 1, 99, "fn", "packed", args)
    assert len(calls) == 2 and len(calls[0]) == len(calls[1])
    assert all(a is b or a == b for a, b in zip(*calls)), calls
    assert calls[1][:13] == (2, 1, 1, 99, "fn", False, True, None, None, "packed", None, None, None)


def test_a_descriptor_is_encoded_again_only_when_what_its_encoding_reads_changed():
    """With the kernel's descriptor metadata (as the GPU compiles it) the encoding reads a descriptor's address,
    shape, strides and padding: one equal in those to the last call's at its position keeps its encoding."""
    calls, encoded = [], []
    direct = direct_launch.unwrap(Compiled(_launcher(calls)))
    direct.descs = [(p, {"swizzle": 128}) for p, _ in direct.descs]  # as compiled for the GPU
    direct.encode = lambda d, meta: encoded.append(d) or [("map", d.base.data_ptr()), *d.shape, *d.strides]
    kv = _desc(300)
    q1, q2 = _desc(100), _desc(100)
    direct(1, 1, 1, 0, "fn", "p", _args(q1, kv))
    direct(1, 1, 1, 0, "fn", "p", _args(q2, kv))
    assert encoded == [q1, kv, q2]  # the same cache keeps its encoding; a q at a new address does not
    same_place = hopper.TensorDescriptor(q2.base, q2.shape, q2.strides, q2.block_shape, q2.layout)
    direct(1, 1, 1, 0, "fn", "p", _args(same_place, _desc(300)))
    assert len(encoded) == 4 and encoded[-1].shape == [300, 128]  # a new object at q2's place: kept; a new cache: not
    wider = hopper.TensorDescriptor(q2.base, [64, 128], [128, 1], q2.block_shape, q2.layout)
    direct(1, 1, 1, 0, "fn", "p", _args(wider, kv))
    assert encoded[-2:] == [wider, kv]  # another shape at the same address is encoded again
    assert calls[-1][13] == ("map", q2.base.data_ptr()) and calls[-1][13 + 5] == ("map", kv.base.data_ptr())


def test_without_metadata_each_descriptor_is_decomposed_every_call():
    """The frontend's decomposition (no metadata) hands the base tensor itself to the launcher: nothing is kept."""
    calls = []
    direct = direct_launch.unwrap(Compiled(_launcher(calls)))
    kv = _desc(300)
    q1, q2 = _desc(100), _desc(100)
    direct(1, 1, 1, 0, "fn", "p", _args(q1, kv))
    direct(1, 1, 1, 0, "fn", "p", _args(q2, kv))
    width = len(driver.make_tensordesc_arg(q1, None))  # a descriptor's arguments in the launcher's list
    assert calls[1][13] is q2.base and calls[1][13 + width] is kv.base
    assert direct.last == [(None, None)] * 2


def test_launchers_other_than_the_known_wrapper_keep_triton_s_path():
    assert direct_launch.unwrap(Compiled(_launcher([], scratch=64))) is None  # scratch allocated per launch
    assert direct_launch.unwrap(Compiled(lambda *a: None)) is None  # not a CudaLauncher
    assert direct_launch.unwrap(object()) is None
    other = _launcher([])
    other.launch = lambda *a, extra=None: a  # a wrapper of another shape: no descriptor closure to read
    assert direct_launch.unwrap(Compiled(other)) is None
