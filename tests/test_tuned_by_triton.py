"""Tuned tables by triton release: a variant's tuned_by_triton.py entries override its tuned.py's on that release
alone (mqa_kernels.common.tuned_by_triton lays them over), and every variant's config reads its own, so the GPU sweep
on 3.8 / 3.9 only has to fill them."""
import importlib

import pytest

from mqa_kernels.common import tuned_by_triton as T

FOLDERS = {"tiled": "prefill.tiled", "gluon_ws_sm90": "prefill.gluon_ws_sm90", "paged_ws_sm90": "decode.paged_ws_sm90",
           "topk": "topk"}


def _by_release(variant: str) -> dict:
    return importlib.import_module(f"mqa_kernels.{FOLDERS[variant]}.tuned_by_triton").BY_RELEASE


def test_a_release_entry_overrides_and_removes_on_that_release_only():
    base = {(8, 128): {"a": 1}, (64, 128): {"a": 2}}
    by = {(3, 8): {(8, 128): {"a": 9}, (64, 128): None}}
    assert T.table(by, base, (3, 8)) == {(8, 128): {"a": 9}}
    assert T.table(by, base, (3, 9)) is base and T.table(by, base, (3, 6)) is base
    assert base == {(8, 128): {"a": 1}, (64, 128): {"a": 2}}  # tuned.py's own table is left alone
    assert T.source(by, (8, 128), "kernels/x", (3, 8)) == "kernels/x/tuned_by_triton.py (triton 3.8)"
    assert T.source(by, (8, 128), "kernels/x", (3, 6)) == "kernels/x/tuned.py"


@pytest.mark.parametrize("variant", sorted(FOLDERS))
def test_every_variant_reads_the_installed_release_s_entries(monkeypatch, variant):
    rel = T.installed_release()
    assert rel is not None and rel >= (3, 6)
    by = _by_release(variant)
    if variant == "tiled":
        from mqa_kernels.prefill.tiled.config import tiled_config

        monkeypatch.setitem(by, rel, {(64, 128): {"BLOCK_Q": 2, "HEAD_MAJOR": True}})
        c = tiled_config(heads=64, dim=128, S=8192, N=8192, clean=True, backend="cuda", units=132)
        assert c.constexprs["BLOCK_Q"] == 2 and c.constexprs["HEAD_MAJOR"]
    elif variant == "gluon_ws_sm90":
        from mqa_kernels.prefill.gluon_ws_sm90.config import tuned_entry, tuned_shapes

        monkeypatch.setitem(by, rel, {(64, 128): None, (8, 32): {"groups": (2, 1)}})
        assert (64, 128) not in tuned_shapes() and (8, 32) in tuned_shapes() and tuned_entry(64, 128) is None
    elif variant == "paged_ws_sm90":
        from mqa_kernels.decode.paged_ws_sm90.config import table_entry, table_source

        monkeypatch.setitem(by, rel, {128: {"small": {"STAGES": 7}}})
        assert table_entry(2, 64, "small") == {"STAGES": 7}
        assert table_source(2, 64).startswith("kernels/decode/paged_ws_sm90/tuned_by_triton.py")
    else:
        from mqa_kernels.topk.config import tuned

        monkeypatch.setitem(by, rel, {"rows": {8192: {"num_warps": 2}}})
        assert tuned("rows", 8192, "cuda")["num_warps"] == 2


def test_release_decode_entries_change_only_what_their_comment_says():
    """3.8 / 3.9's decode entries at next_n 5-8: parts of MMA_N 64 (PARTS_64) or two math warpgroups with parts of
    128 (TWO_WG) where the sixth run timed them faster, every other field and class as tuned.py has it, so the two
    files cannot drift apart."""
    from mqa_kernels.decode.paged_ws_sm90 import tuned_by_triton as D
    from mqa_kernels.decode.paged_ws_sm90.tuned import CUDA_TUNED

    want = {(3, 8): {(320, "small"): D.TWO_WG, (384, "small"): D.TWO_WG, (384, "large"): D.TWO_WG,
                     (448, "small"): D.TWO_WG, (512, "large"): D.TWO_WG},
            (3, 9): {(384, "small"): D.TWO_WG, (384, "large"): D.TWO_WG, (448, "small"): D.TWO_WG,
                     (512, "large"): D.TWO_WG}}
    for rel in ((3, 8), (3, 9)):
        over = D.BY_RELEASE[rel]
        assert set(over) == {320, 384, 448, 512}, rel
        for key, per in over.items():
            assert set(per) == set(CUDA_TUNED[key])
            for size, entry in per.items():
                base = CUDA_TUNED[key][size]
                fields = want[rel].get((key, size), {} if base["MMA_N"] == 64 or base["MATH_WG"] == 2 else D.PARTS_64)
                assert entry == {**base, **fields}, (rel, key, size)
                assert (entry == base) == ((key, size) in ((320, "large"), (512, "small"))), (rel, key, size)
