"""The asm summary's parsers and the config override syntax, on small hand-written inputs (no compile)."""
import re

import pytest

from mqa_cli.errors import UserError
from mqa_cli.plan.overrides import apply_overrides, key_values, split_kernel_spec
from mqa_cli.inspect.asm import (AMD_GROUPS, CUDA_GROUPS, _group, amd_resources, cuda_resources, diff_table,
                                 gcn_opcodes, sass_opcodes, summary_table)
from mqa_cli.inspect.sass_loops import loop_mix, op_name, tile_loops
from mqa_kernels.common.naming import kernel_name
from mqa_kernels.prefill.tiled.config import tiled_config

SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                       /* 0x00000a00ff017b82 */
                                                                                                /* 0x000e620000000800 */
        /*0010*/              @!P0 LDG.E.128 R4, desc[UR8][R2.64] ;                             /* 0x0000000802047981 */
        /*0020*/               @P1 LDG.E.128 R8, desc[UR8][R2.64+0x10] ;
        /*0030*/                   LDGDEPBAR ;
        /*0040*/                   QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24, gsb0 ;
        /*0050*/                   FMNMX R3, RZ, R3, !PT ;
        /*0060*/                   SHFL.BFLY PT, R5, R4, 0x1, 0x1f ;
        /*0070*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0080*/                   STS.128 [R0], R4 ;
        /*0090*/                   STL [R1], R9 ;
        /*00a0*/                   STG.E.64 desc[UR8][R6.64], R10 ;
"""

USAGE = """Resource usage:
 Common:
  GLOBAL:0
 Function other_kernel:
  REG:32 STACK:8 SHARED:0 LOCAL:4 CONSTANT[0]:400
 Function my_kernel:
  REG:168 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:632 TEXTURE:0
"""

AMDGCN = """
\tbuffer_load_dwordx4 v[0:3], v4, s[0:3], 0 offen
\tds_read_b128 v[8:11], v12
\tds_write_b64 v12, v[8:9]
\tv_mfma_f32_16x16x128_f8f6f4 v[86:89], v[26:33], v[64:71], 0
\tv_mfma_f32_16x16x128_f8f6f4 v[86:89], v[26:33], v[64:71], 0 cbsz:1 blgp:1
\tv_mfma_f32_16x16x32_fp8_fp8 v[68:71], v[46:47], v[64:65], 0
\tv_max_f32_e32 v1, 0, v1
\tv_mov_b32_dpp v2, v3 row_shr:1 row_mask:0xf bank_mask:0xf
\tv_add_f32_dpp v2, v3, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
\tds_swizzle_b32 v5, v6 offset:swizzle(SWAP,16)
\tscratch_store_dword off, v7, s0
\ts_endpgm
; ScratchSize: 0
; LDSByteSize: 0 bytes/workgroup (compile time only)
; Occupancy: 2
\t.amdgpu_metadata
amdhsa.kernels:
  - .agpr_count:     4
    .private_segment_fixed_size: 16
    .sgpr_count:     56
    .sgpr_spill_count: 0
    .vgpr_count:     165
    .vgpr_spill_count: 3
"""


def test_sass_opcodes_skip_predicates_and_control_lines():
    ops = sass_opcodes(SASS)
    assert ops["LDG.E.128"] == 2 and ops["QGMMA.64x256x32.F32.E4M3.E4M3"] == 1 and ops["LDC"] == 1
    g = _group(ops, CUDA_GROUPS)
    assert g["tensor core"] == {"QGMMA.64x256x32.F32.E4M3.E4M3": 1}
    assert g["global load"] == {"LDG.E.128": 2}  # LDGDEPBAR is a barrier, not a load
    assert g["global store"] == {"STG.E.64": 1}
    assert g["shared load"] == {"LDSM.16.M88.4": 1} and g["shared store"] == {"STS.128": 1}
    assert g["shuffle"] == {"SHFL.BFLY": 1} and g["max / relu"] == {"FMNMX": 1} and g["spill"] == {"STL": 1}


def test_cuda_resources_pick_the_named_function():
    assert cuda_resources(USAGE, "my_kernel") == {"REG": 168, "STACK": 0, "SHARED": 1024, "LOCAL": 0}
    assert cuda_resources(USAGE, "other_kernel")["LOCAL"] == 4


def test_amd_resources_from_metadata():
    r = amd_resources(AMDGCN)
    assert r == {"vgprs": 165, "sgprs": 56, "agprs": 4, "vgpr_spills": 3, "sgpr_spills": 0, "scratch_bytes": 16,
                 "static_lds_bytes": 0, "occupancy_waves_per_simd": 2}


def test_amd_instruction_mix():
    ops, dpp = gcn_opcodes(AMDGCN)
    g = _group(ops + dpp, AMD_GROUPS)
    assert g["tensor core"] == {"v_mfma_f32_16x16x128_f8f6f4 [e4m3×e4m3]": 1,
                                "v_mfma_f32_16x16x128_f8f6f4 [e5m2×e5m2]": 1, "v_mfma_f32_16x16x32_fp8_fp8": 1}
    assert g["global load"] == {"buffer_load_dwordx4": 1}
    assert g["shared load"] == {"ds_read_b128": 1} and g["shared store"] == {"ds_write_b64": 1}
    assert g["shuffle"] == {"ds_swizzle_b32": 1, "v_add_f32_dpp": 1, "v_mov_b32_dpp": 1}
    assert g["max / relu"] == {"v_max_f32_e32": 1}
    assert g["spill"] == {"scratch_store_dword": 1}
    assert "amdhsa" not in " ".join(ops) and sum(ops.values()) == 12


def _summary(regs, qgmma):
    return {"kernel": "tiled", "kernel_name": "k", "target": "sm90", "backend": "cuda", "config": "k_w4_s3",
            "hash": "h", "resources": {"registers": regs, "warps": 4, "stages": 3},
            "instructions": {"tensor core": {"QGMMA.64x256x32.F32.E4M3.E4M3": qgmma}, "shuffle": {}},
            "total_instructions": 100 + qgmma}


def test_tables_render():
    text = summary_table(_summary(168, 4))
    assert "registers / thread" in text and "QGMMA.64x256x32.F32.E4M3.E4M3" in text and "104 instructions" in text
    assert "tensor-core loops" not in text  # (none in this summary)
    diff = diff_table(_summary(168, 4), _summary(200, 8))
    assert "+32" in diff and "+4" in diff


LOOP_SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0020*/                   WARPGROUP.ARRIVE ;
        /*0030*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], RZ, !UPT ;
        /*0040*/                   FMNMX R3, RZ, R24, !PT ;
        /*0050*/                   FFMA R4, R3, R5, R4 ;
        /*0060*/              @!P0 FMNMX R6, RZ, R25, !PT ;
        /*0070*/              @P1 BRA 0x20 ;
        /*0080*/                   ISETP.NE.AND P2, PT, R2, R7, PT ;
        /*0090*/                   FADD R8, R8, R9 ;
        /*00a0*/              @P2 BRA 0x10 ;
        /*00b0*/                   FADD R8, R8, R9 ;
        /*00c0*/                   BRA 0xb0;
        /*00d0*/                   EXIT ;
"""


def test_tensor_core_loops_are_the_innermost_loops_that_issue_a_wgmma():
    """The loop at 0x20-0x70 (inside the one at 0x10-0xa0) issues the QGMMA: it is the only one reported, with every
    instruction counted under its opcode (predicates and modifiers dropped); the self-branch at 0xc0 has no wgmma."""
    loops = tile_loops(LOOP_SASS)
    assert len(loops) == 1 and len(loops[0]) == 6, loops
    assert loop_mix(loops[0]) == {"FMNMX": 2, "BRA": 1, "FFMA": 1, "QGMMA": 1, "WARPGROUP": 1}
    assert op_name("@!P0 LDG.E.64 R2, desc[UR4][R4.64]") == "LDG" and op_name("QGMMA.64x128x32") == "QGMMA"
    d = _summary(168, 4) | {"tensor_loops": [{"instructions": 6, "mix": loop_mix(loops[0])}]}
    text = summary_table(d)
    assert "tensor-core loops" in text and "loop 1: 6 instructions: FMNMX 2, BRA 1" in text
    e = _summary(168, 4) | {"tensor_loops": [{"instructions": 9, "mix": {}}]}
    diff = diff_table(d, e)
    assert re.search(r"tensor-core loop\s+loop 1\s+6\s+9\s+\+3", diff), diff


def test_override_syntax():
    cfg = tiled_config(heads=64, dim=128, S=64, N=64, clean=True, backend="cuda", units=132)
    assert split_kernel_spec("tiled:BLOCK_KV=128, num_warps=8") == ("tiled", {"BLOCK_KV": "128", "num_warps": "8"})
    assert split_kernel_spec(":num_stages=2") == (None, {"num_stages": "2"})
    assert split_kernel_spec("tiled") == ("tiled", {})
    new = apply_overrides(cfg, {"BLOCK_KV": "128", "num_warps": "8", "CLEAN": "0"})
    assert new.constexprs["BLOCK_KV"] == 128 and new.constexprs["CLEAN"] is False and new.options["num_warps"] == 8
    assert new.name != cfg.name and "_BLOCK_KV_128_CLEAN_0" in new.name and new.dump_name.endswith("_w8_s3")
    assert cfg.constexprs["BLOCK_KV"] == 64  # the original is untouched
    with pytest.raises(UserError, match="unknown config key"):
        apply_overrides(cfg, {"BLOCK_K": "1"})
    with pytest.raises(UserError, match="KEY=VALUE"):
        split_kernel_spec("tiled:BLOCK_KV")
    # the A/B scripts' variant names: the same keys, typed without a config to go by
    assert key_values("STAGES=4, Q_IN_LANES=true,PTX_SLOTS=0,x=1.5") == {"STAGES": 4, "Q_IN_LANES": True,
                                                                         "PTX_SLOTS": 0, "x": 1.5}
    assert key_values("") == {}


def test_name_carries_the_config():
    assert kernel_name("k", ("H", "CLEAN", "MODE", "X"), {"H": 64, "CLEAN": True, "MODE": "a-b", "X": None}) == \
        "k_H_64_CLEAN_1_MODE_A_B_X_NONE"
