"""Tuned tables by triton release (mqa_kernels.common.tuned_by_triton): a release's entries override tuned.py's on that
release alone, and every variant's config reads them, so the GPU sweep on 3.8 / 3.9 only has to fill them."""
import pytest

from mqa_kernels.common import tuned_by_triton as T


def test_a_release_entry_overrides_and_removes_on_that_release_only(monkeypatch):
    base = {(8, 128): {"a": 1}, (64, 128): {"a": 2}}
    monkeypatch.setitem(T.BY_RELEASE, "gluon_ws_sm90", {(3, 8): {(8, 128): {"a": 9}, (64, 128): None}})
    assert T.table("gluon_ws_sm90", base, (3, 8)) == {(8, 128): {"a": 9}}
    assert T.table("gluon_ws_sm90", base, (3, 9)) is base and T.table("gluon_ws_sm90", base, (3, 6)) is base
    assert base == {(8, 128): {"a": 1}, (64, 128): {"a": 2}}  # tuned.py's own table is left alone


@pytest.mark.parametrize("variant", ["tiled", "gluon_ws_sm90", "paged_ws_sm90", "topk"])
def test_every_variant_reads_the_installed_release_s_entries(monkeypatch, variant):
    rel = T.installed_release()
    assert rel is not None and rel >= (3, 6)
    if variant == "tiled":
        from mqa_kernels.prefill.tiled.config import tiled_config

        monkeypatch.setitem(T.BY_RELEASE, variant, {rel: {(64, 128): {"BLOCK_Q": 2, "HEAD_MAJOR": True}}})
        c = tiled_config(heads=64, dim=128, S=8192, N=8192, clean=True, backend="cuda", units=132)
        assert c.constexprs["BLOCK_Q"] == 2 and c.constexprs["HEAD_MAJOR"]
    elif variant == "gluon_ws_sm90":
        from mqa_kernels.prefill.gluon_ws_sm90.config import tuned_entry, tuned_shapes

        monkeypatch.setitem(T.BY_RELEASE, variant, {rel: {(64, 128): None, (8, 32): {"groups": (2, 1)}}})
        assert (64, 128) not in tuned_shapes() and (8, 32) in tuned_shapes() and tuned_entry(64, 128) is None
    elif variant == "paged_ws_sm90":
        from mqa_kernels.decode.paged_ws_sm90.config import table_entry

        monkeypatch.setitem(T.BY_RELEASE, variant, {rel: {128: {"small": {"STAGES": 7}}}})
        assert table_entry(2, 64, "small") == {"STAGES": 7}
    else:
        from mqa_kernels.topk.config import tuned

        monkeypatch.setitem(T.BY_RELEASE, variant, {rel: {"rows": {8192: {"num_warps": 2}}}})
        assert tuned("rows", 8192, "cuda")["num_warps"] == 2


def test_release_decode_entries_change_only_what_their_comment_says():
    """3.8 / 3.9's decode entries at next_n 5-8: parts of MMA_N 64 (PARTS_64) or two math warpgroups with parts of
    128 (TWO_WG) where the sixth run timed them faster, every other field and class as tuned.py has it, so the two
    files cannot drift apart."""
    from mqa_kernels.decode.paged_ws_sm90.tuned import CUDA_TUNED

    want = {(3, 8): {(320, "small"): T.TWO_WG, (384, "small"): T.TWO_WG, (384, "large"): T.TWO_WG,
                     (448, "small"): T.TWO_WG, (512, "large"): T.TWO_WG},
            (3, 9): {(384, "small"): T.TWO_WG, (384, "large"): T.TWO_WG, (448, "small"): T.TWO_WG,
                     (512, "large"): T.TWO_WG}}
    for rel in ((3, 8), (3, 9)):
        over = T.BY_RELEASE["paged_ws_sm90"][rel]
        assert set(over) == {320, 384, 448, 512}, rel
        for key, per in over.items():
            assert set(per) == set(CUDA_TUNED[key])
            for size, entry in per.items():
                base = CUDA_TUNED[key][size]
                fields = want[rel].get((key, size), {} if base["MMA_N"] == 64 or base["MATH_WG"] == 2 else T.PARTS_64)
                assert entry == {**base, **fields}, (rel, key, size)
                assert (entry == base) == ((key, size) in ((320, "large"), (512, "small"))), (rel, key, size)
