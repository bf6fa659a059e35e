"""The card models of one architecture, as data: what sets a problem's floor on the card a user has.

One architecture (sm90) covers cards whose memory differs by more than 2x (an H100 PCIe reads 2.0 TB/s, an H200
4.8 TB/s) and whose SM counts differ (114 to 132; an H20 has 78). Dispatch keys on the architecture; the floor,
the "% of floor" of `bench` and the decode size classes key on the card. A card is found from the name the driver
reports (`torch.cuda.get_device_name()`), most specific name first; an sm90 card not in the table keeps the
architecture's figures and says so.

Datasheet figures (dense fp8, no sparsity; memory bandwidth; L2) are NVIDIA's: H100 / H800 (SXM5, PCIe, NVL)
and H200 (SXM, NVL) product datasheets, GH200 Grace Hopper datasheet, H20 product brief. Measured ceilings come from
this project's own runs on the lent cards (docs/PERFORMANCE.md): the device-to-device copy rate (bytes read plus
written) and fp8 wgmma alone, each at the card's power cap.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    key: str  # what --target accepts: h100, h200, ...
    match: tuple[str, ...]  # substrings of the driver's device name, all of which must be present
    arch: str  # the target it belongs to (sm90)
    description: str
    peak_fp8_tflops: float
    bandwidth_tbs: float
    units: int  # SMs
    l2_mib: int
    measured_fp8_tflops: float | None = None
    measured_bandwidth_tbs: float | None = None
    measured_on: str | None = None  # the run the measured figures come from

    def matches(self, device_name: str) -> bool:
        name = device_name.upper()
        return all(m.upper() in name for m in self.match)


# most specific first: "H100 PCIe" before "H100", "H200 NVL" before "H200", "GH200" before "H200"
CARDS: tuple[Card, ...] = (
    Card("h100-pcie", ("H100", "PCIE"), "sm90", "NVIDIA H100 PCIe", 1513.0, 2.0, 114, 50),
    Card("h100-nvl", ("H100", "NVL"), "sm90", "NVIDIA H100 NVL", 1671.0, 3.9, 132, 50),
    Card("h800-pcie", ("H800", "PCIE"), "sm90", "NVIDIA H800 PCIe", 1513.0, 2.0, 114, 50),
    Card("h800", ("H800",), "sm90", "NVIDIA H800 SXM5", 1979.0, 3.35, 132, 50),
    Card("gh200", ("GH200",), "sm90", "NVIDIA GH200 (HBM3e, 144 GB)", 1979.0, 4.9, 132, 50),
    Card("h200-nvl", ("H200", "NVL"), "sm90", "NVIDIA H200 NVL", 1671.0, 4.8, 132, 50),
    Card("h200", ("H200",), "sm90", "NVIDIA H200 SXM", 1979.0, 4.8, 132, 50,
         measured_fp8_tflops=1635.0, measured_bandwidth_tbs=4.3, measured_on="2026-11-30, docs/PERFORMANCE.md"),
    Card("h100", ("H100",), "sm90", "NVIDIA H100 SXM5", 1979.0, 3.35, 132, 50,
         measured_bandwidth_tbs=3.0, measured_on="2026-12-05: 3.01 TB/s, tools/ab.py's copy, docs/PERFORMANCE.md"),
    Card("h20", ("H20",), "sm90", "NVIDIA H20", 296.0, 4.0, 78, 60),
)

BY_KEY = {c.key: c for c in CARDS}


def card_for(device_name: str, arch: str) -> Card | None:
    """The card model of a device of `arch` named `device_name`, or None where the table has none."""
    return next((c for c in CARDS if c.arch == arch and c.matches(device_name)), None)
