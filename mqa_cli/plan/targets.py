"""Targets as data: the facts dispatch and the time floor need, and lazy GPU detection.

Peak figures are dense (no sparsity) fp8 from the vendors' datasheets:
- H100/H200 SXM: 1,979 TFLOP/s fp8, H200 4.8 TB/s HBM3e (NVIDIA H200 datasheet); 227 KiB smem per block.
- B200: 4,500 TFLOP/s fp8 dense, 8 TB/s (NVIDIA HGX B200 datasheet, per GPU); 227 KiB smem per block.
- MI300X: 2,614.9 TFLOP/s fp8 dense, 5.3 TB/s (AMD Instinct MI300X datasheet); 64 KiB LDS; fp8 is e4m3fnuz.
- MI355X: 5,000 TFLOP/s fp8 dense (MI350X: 4,600), 8 TB/s (AMD Instinct MI350 series datasheet); 160 KiB LDS.
Measured ceilings (where we have them) come from this project's own runs: ../docs/PERFORMANCE.md. sm90: 1635 TF/s
is fp8 wgmma alone on the H200 at its power cap (the mma_ceiling probe, docs/EXPERIMENTS.md); 4.3 TB/s is the
device-to-device copy rate.
The sm90 entry carries the H200's figures; the card a GPU run finds (or `--target h100`, `h200`, ...) carries its
own (cards.py): the floor is the card's, dispatch the architecture's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..errors import UserError


@dataclass(frozen=True)
class Target:
    name: str  # sm90, sm100, gfx942, gfx950, cpu
    backend: str  # cuda, hip, or interpreter
    arch: object  # 90 / 100 for cuda, "gfx942" / "gfx950" for hip, None for cpu
    fp8: str  # "e4m3fn" or "e4m3fnuz"
    warp_size: int
    peak_fp8_tflops: float | None
    bandwidth_tbs: float | None
    smem_per_block_kib: int | None
    units: int | None  # SMs / CUs
    description: str
    measured_fp8_tflops: float | None = None
    measured_bandwidth_tbs: float | None = None
    device_name: str | None = None  # set when detected
    card: str | None = None  # the card model whose figures these are (cards.py key), None for the architecture's
    l2_mib: int | None = None

    @property
    def is_gpu(self) -> bool:
        return self.backend != "interpreter"

    def gpu_target(self):
        """triton.backends.compiler.GPUTarget for cross-compiling (imports triton)."""
        from triton.backends.compiler import GPUTarget

        if not self.is_gpu:
            raise UserError("target cpu runs the Triton interpreter and has no compiled code; pick sm90, sm100, gfx942 or gfx950")
        return GPUTarget(self.backend, self.arch, self.warp_size)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("sm90", "cuda", 90, "e4m3fn", 32, 1979.0, 4.8, 227, 132,
               "NVIDIA Hopper, the H200's figures (--target h100 for the H100's)",
               measured_fp8_tflops=1635.0, measured_bandwidth_tbs=4.3, card="h200", l2_mib=50),
        Target("sm100", "cuda", 100, "e4m3fn", 32, 4500.0, 8.0, 227, 148, "NVIDIA Blackwell (B200)"),
        Target("gfx942", "hip", "gfx942", "e4m3fnuz", 64, 2614.9, 5.3, 64, 304, "AMD CDNA3 (MI300X)"),
        Target("gfx950", "hip", "gfx950", "e4m3fn", 64, 5000.0, 8.0, 160, 256, "AMD CDNA4 (MI350X/MI355X)"),
        Target("cpu", "interpreter", None, "e4m3fn", 1, None, None, None, None,
               "CPU, Triton interpreter (correctness only; its times say nothing about GPU speed)"),
    )
}


def with_card(base: Target, card, units: int | None = None, device_name: str | None = None) -> Target:
    """`base` (an architecture) with the figures of one card model of it: bandwidth, peak, SMs, L2, measured
    ceilings (those the card has; an unmeasured one is left out rather than borrowed from another card)."""
    return replace(base, peak_fp8_tflops=card.peak_fp8_tflops, bandwidth_tbs=card.bandwidth_tbs,
                   units=units or card.units, description=card.description, card=card.key, l2_mib=card.l2_mib,
                   measured_fp8_tflops=card.measured_fp8_tflops, measured_bandwidth_tbs=card.measured_bandwidth_tbs,
                   device_name=device_name)


def get_target(name: str) -> Target:
    from .cards import BY_KEY

    if name in TARGETS:
        return TARGETS[name]
    if name in BY_KEY:
        card = BY_KEY[name]
        return with_card(TARGETS[card.arch], card)
    raise UserError(f"unknown target {name!r}; choose one of {', '.join([*TARGETS, *BY_KEY])}")


def _detect_uncached() -> Target:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return TARGETS["cpu"]
    import torch  # the only path that imports torch for target facts

    if not torch.cuda.is_available():
        return TARGETS["cpu"]
    props = torch.cuda.get_device_properties(0)
    if getattr(torch.version, "hip", None):
        arch = props.gcnArchName.split(":")[0]
        base = TARGETS.get(arch)
        if base is None:
            return Target(arch, "hip", arch, "e4m3fnuz" if arch.startswith("gfx94") else "e4m3fn", 64, None, None,
                          64, props.multi_processor_count, f"AMD {arch} (no datasheet entry)",
                          device_name=props.name)
    else:
        cc = props.major * 10 + props.minor
        base = TARGETS.get(f"sm{cc}")
        if base is None:
            return Target(f"sm{cc}", "cuda", cc, "e4m3fn", 32, None, None, None, props.multi_processor_count,
                          f"NVIDIA sm{cc} (no datasheet entry)", device_name=props.name)
        from .cards import card_for

        card = card_for(props.name, base.name)
        if card is not None:
            return with_card(base, card, units=props.multi_processor_count, device_name=props.name)
        if base.card is not None:  # a card of this architecture the table does not name: no borrowed figures
            return replace(base, units=props.multi_processor_count, device_name=props.name, card=None,
                           description=f"{props.name} (no card entry: the architecture's datasheet peaks)",
                           measured_fp8_tflops=None, measured_bandwidth_tbs=None)
    return replace(base, units=props.multi_processor_count, device_name=props.name)


_DETECTED: Target | None = None


def detect() -> Target:
    """The GPU in this process's view, or cpu; cached after the first call."""
    global _DETECTED
    if _DETECTED is None:
        _DETECTED = _detect_uncached()
    return _DETECTED


def resolve(name: str | None) -> Target:
    """--target NAME, or the detected device when None."""
    return detect() if name is None else get_target(name)


def device_for(tgt: Target) -> str:
    """The torch device that runs `tgt` here, or a one-line refusal when this machine has another target."""
    here = detect()
    if tgt.name != here.name:
        raise UserError(f"cannot run on {tgt.name}: this machine has {here.name}; `mqa-logits dump --target "
                        f"{tgt.name}` compiles for it without running")
    return "cuda" if tgt.is_gpu else "cpu"
