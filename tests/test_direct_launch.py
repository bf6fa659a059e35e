"""mqa_cli.launch.direct on the CPU: the installed triton's own launcher wrapper (CudaLauncher.__call__ around
wrap_handle_tensordesc's closure, in whichever form this triton builds it: 3.6's, or 3.8's and 3.9's) built around
a recording stand-in for the compiled C launcher. The direct call must hand the C launcher exactly what the wrapper
hands it, encode a descriptor only when it is not the one of the call before, and give up (None) wherever the
wrapper is not the one it knows."""
import pytest
import torch

driver = pytest.importorskip("triton.backends.nvidia.driver")
hopper = pytest.importorskip("triton.experimental.gluon.nvidia.hopper")
import triton  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402

from mqa_cli.launch import direct as direct_launch
from mqa_kernels.common import versions  # noqa: E402

# How this triton builds its launcher, by feature: 3.8's keeps the kernel's argument annotations beside the launch.
FORM = "3.8" if hasattr(driver, "annotate_arguments") else "3.6"

SIGNATURE = {"q_desc": "tensordesc<fp8e4nv[64, 128]>", "kv_desc": "tensordesc<fp8e4nv[64, 128]>", "w": "*fp32",
             "n": "i32", "out": "*fp32", "stride": "i32", "BLOCK": "constexpr"}


def _desc(rows: int):
    layout = gl.NVMMASharedLayout.get_default_for([64, 128], gl.float8e4nv)
    return hopper.TensorDescriptor(torch.empty(rows, 128, dtype=torch.float8_e4m3fn), [rows, 128],
                                   [128, 1], [64, 128], layout)


class Recorder:
    """Stands for the compiled C launcher (a builtin, no Python code object): records each call's arguments."""

    def __init__(self, calls: list):
        self.calls = calls

    def __call__(self, *a):
        self.calls.append(a)


def _launcher(calls: list, scratch: int = 0):
    """A CudaLauncher as this triton builds it (its __init__'s assignments), its compiled C launcher replaced by a
    recorder."""
    run = object.__new__(driver.CudaLauncher)
    if FORM == "3.8":
        from triton.backends.driver import expand_signature

        metas = [None, None]  # the frontend's descriptors (the GPU compile gives each its metadata)
        expanded = expand_signature(SIGNATURE.values(), metas, "nvTmaDesc")
        run.arg_annotations = driver.annotate_arguments(expanded)
        run.kernel_signature = driver.make_kernel_signature(expanded)
        run.gsan_enabled = False
        run.launch = driver.wrap_handle_tensordesc(Recorder(calls), SIGNATURE, metas)
    else:
        run.launch = driver.wrap_handle_tensordesc(Recorder(calls), SIGNATURE, None)
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


def _kernel_args(call: tuple) -> tuple:
    """The kernel's arguments in one recorded launch: after 13 fixed ones (3.6), or the last, a tuple (3.8)."""
    return tuple(call[13:]) if FORM == "3.6" else tuple(call[-1])


@pytest.fixture(autouse=True)
def no_gpu_driver(monkeypatch):
    """3.8's CudaLauncher looks up the active driver (for scratch it does not allocate here, and to encode the
    kernel signature), and its argument annotations are objects of the C module triton builds against libcuda:
    stand-ins, since this machine has no GPU driver (the launcher only passes them on)."""
    import types

    utils = types.SimpleNamespace(build_signature_metadata=lambda sig: ("signature", tuple(sig)))
    monkeypatch.setattr(triton.runtime.driver, "_active", types.SimpleNamespace(utils=utils))
    if FORM == "3.8" and getattr(driver, "PyKernelArg", None) is None:
        monkeypatch.setattr(driver, "PyKernelArg", lambda **kw: types.SimpleNamespace(**kw))


def _same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or a == b


def test_the_direct_call_hands_the_launcher_what_triton_s_wrapper_hands_it():
    calls = []
    run = _launcher(calls)
    direct = direct_launch.unwrap(Compiled(run))
    assert direct is not None and direct.form == FORM and [p for p, _ in direct.descs] == [0, 1]
    q, kv = _desc(100), _desc(300)
    args = _args(q, kv)
    run(2, 1, 1, 99, "fn", "packed", None, None, None, *args)
    direct(2, 1, 1, 99, "fn", "packed", args)
    assert len(calls) == 2 and len(calls[0]) == len(calls[1])
    assert all(_same(a, b) for a, b in zip(*calls)), calls
    if FORM == "3.6":
        assert calls[1][:13] == (2, 1, 1, 99, "fn", False, True, None, None, "packed", None, None, None)
    else:
        assert calls[1][:13] == (2, 1, 1, 99, "fn", False, True, "packed", None, None, None, None, None)
        assert calls[1][13] is run.arg_annotations and calls[1][14] is run.kernel_signature
    assert _kernel_args(calls[1])[-1] == 64 and len(_kernel_args(calls[1])) == 2 * len(direct.encode(q, None)) + 5


@pytest.mark.versions
def test_the_launcher_form_is_the_one_the_version_facts_name():
    direct = direct_launch.unwrap(Compiled(_launcher([])))
    assert direct is not None
    assert versions.holds("launcher_3_6") == (direct.form == "3.6")
    assert versions.holds("launcher_3_8") == (direct.form == "3.8")


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
    last = _kernel_args(calls[-1])
    assert last[0] == ("map", q2.base.data_ptr()) and last[5] == ("map", kv.base.data_ptr())


def test_without_metadata_each_descriptor_is_decomposed_every_call():
    """The frontend's decomposition (no metadata) hands the base tensor itself to the launcher: nothing is kept."""
    calls = []
    direct = direct_launch.unwrap(Compiled(_launcher(calls)))
    kv = _desc(300)
    q1, q2 = _desc(100), _desc(100)
    direct(1, 1, 1, 0, "fn", "p", _args(q1, kv))
    direct(1, 1, 1, 0, "fn", "p", _args(q2, kv))
    width = len(direct.encode(q1, None))  # a descriptor's arguments in the launcher's list
    assert _kernel_args(calls[1])[0] is q2.base and _kernel_args(calls[1])[width] is kv.base
    assert direct.last == [(None, None)] * 2


def test_launchers_other_than_the_known_wrapper_keep_triton_s_path():
    assert direct_launch.unwrap(Compiled(_launcher([], scratch=64))) is None  # scratch allocated per launch
    assert direct_launch.unwrap(Compiled(lambda *a: None)) is None  # not a CudaLauncher
    assert direct_launch.unwrap(object()) is None
    other = _launcher([])
    other.launch = lambda *a, extra=None: a  # a wrapper of another shape: no descriptor closure to read
    assert direct_launch.unwrap(Compiled(other)) is None


def test_a_kernel_without_descriptors_gets_the_c_launcher_itself():
    """No descriptor: triton's wrapper is the C launcher; the direct call passes the argument tuple as it is."""
    global SIGNATURE
    calls = []
    saved, SIGNATURE = SIGNATURE, {"w": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    try:
        run = _launcher(calls)
    finally:
        SIGNATURE = saved
    direct = direct_launch.unwrap(Compiled(run))
    assert direct is not None and direct.descs == []
    args = (torch.empty(4, device="meta"), 7, 64)
    run(3, 1, 1, 5, "fn", "packed", None, None, None, *args)
    direct(3, 1, 1, 5, "fn", "packed", args)
    assert len(calls) == 2 and all(_same(a, b) for a, b in zip(*calls)), calls
    assert _kernel_args(calls[1]) == args
