"""Card models: the floor `bench` and `explain` report is the card's (an H100 reads 3.35 TB/s, not the H200's 4.8),
found from the driver's device name; dispatch still keys on the architecture."""
from types import SimpleNamespace

import pytest

from mqa_cli.bench import timing
from mqa_cli.errors import UserError
from mqa_cli.plan import cards, targets
from mqa_cli.problem.prefill import ProblemSpec, counts


@pytest.mark.parametrize("device_name, key", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"), ("NVIDIA H200 NVL", "h200-nvl"), ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA H800", "h800"), ("NVIDIA H20", "h20"), ("NVIDIA A100-SXM4-80GB", None)])
def test_card_found_from_the_driver_name(device_name, key):
    card = cards.card_for(device_name, "sm90")
    assert (card.key if card else None) == key


def test_every_card_is_found_from_its_own_description():
    """No entry is shadowed by a less specific one before it (H200 before GH200 would take the GH200)."""
    for c in cards.CARDS:
        assert cards.card_for(c.description, c.arch) is c, c.key


def _detect_with(monkeypatch, name: str, sms: int):
    import torch

    props = SimpleNamespace(name=name, major=9, minor=0, multi_processor_count=sms)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    return targets._detect_uncached()


def test_detected_h100_floor_is_the_h100s(monkeypatch):
    t = _detect_with(monkeypatch, "NVIDIA H100 80GB HBM3", 132)
    assert (t.name, t.card, t.bandwidth_tbs, t.units) == ("sm90", "h100", 3.35, 132)
    c = counts(ProblemSpec(batch=1, seq=8192, heads=8, dim=128))
    h100 = timing.binding_floor(c.flop, c.bytes, t)
    h200 = timing.binding_floor(c.flop, c.bytes, targets.get_target("h200"))
    assert h100.copy_tbs == cards.BY_KEY["h100"].measured_bandwidth_tbs < h200.copy_tbs == 4.3
    assert h100.memory_us > h200.memory_us and "H100" in h100.measured


def test_unknown_hopper_card_borrows_no_measured_ceiling(monkeypatch):
    t = _detect_with(monkeypatch, "NVIDIA Hopper Engineering Sample", 100)
    assert t.card is None and t.units == 100
    assert t.measured_bandwidth_tbs is None and t.measured_fp8_tflops is None
    assert timing.ceilings(t)[2].startswith("datasheet")


def test_target_flag_takes_a_card_and_dispatch_keeps_the_architecture():
    t = targets.get_target("h100-pcie")
    assert (t.name, t.card, t.units, t.bandwidth_tbs) == ("sm90", "h100-pcie", 114, 2.0)
    with pytest.raises(UserError, match="h100"):
        targets.get_target("h1000")
