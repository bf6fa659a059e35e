"""tools/ncu_hot.py reads Nsight Compute's source page as exported (a kernel-name preamble, quoted numbers with
thousands separators, one stall column per reason) and ranks the instructions by warp-state samples."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "ncu_hot.py"


def test_ranks_instructions_by_samples_with_their_main_stall_reasons(tmp_path):
    csv = tmp_path / "source.csv"
    csv.write_text(
        '"Kernel Name","paged_mqa_logits_ws_sm90",\n'
        '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
        '"Instructions Executed","stall_barrier","stall_long_sb","stall_math"\n'
        '"0x10","FFMA R1, R2, R3, R1","30","10","1,000","0","0","30"\n'
        '"0x20","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2","1,500","1,200","2,000","0","1,400","100"\n'
        '"0x30","BAR.SYNC.DEFER_BLOCKING 0x1","470","470","10","470","0","0"\n')
    r = subprocess.run([sys.executable, str(SCRIPT), str(csv), "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("3 instructions, 2000 warp-state samples")
    assert len(lines) == 3  # the two with most, heaviest first
    assert "75.0 %" in lines[1] and "long_sb=1400" in lines[1] and "TRYWAIT" in lines[1]
    assert "23.5 %" in lines[2] and "barrier=470" in lines[2] and "BAR.SYNC" in lines[2]


def test_says_what_is_missing_instead_of_a_traceback(tmp_path):
    csv = tmp_path / "other.csv"
    csv.write_text('"ID","Metric"\n"1","2"\n')
    r = subprocess.run([sys.executable, str(SCRIPT), str(csv)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no header with Address and Source" in r.stdout and not r.stderr
