"""This variant's choices by triton release, laid over tuned.py's (swept on 3.6) on that release alone
(mqa_kernels.common.tuned_by_triton.table): next_n 5-8 (320-512 live columns at H 64) on 3.8 and 3.9, timed on the
H200 (2026-12-04, docs/log/gpu-2026-12-04/, `ab configs --row paged_ws_sm90`, the engines' form; docs/PERFORMANCE.md).

PARTS_64's time over TWO_WG's at B 8 C 8K / B 64 C 8K (small class) and B 64 C 64K (large):
  3.8: next_n 5 1.050 / 1.003 / -, next_n 6 1.116 / 1.130 / 1.116, next_n 7 1.032 / 1.001 / -;
  3.9: next_n 5 -, next_n 6 1.066 / 1.030 / 1.045, next_n 7 1.166 / 1.067 / -.
Where PARTS_64 stays, TWO_WG's time over it: 3.8 next_n 5 large 1.072, next_n 7 large 1.022; 3.9 next_n 5 small
1.012 / 0.986, next_n 7 large 1.000 (that call's A/A: 0.998-1.022). tuned.py's MMA_N 128 at three warpgroups took
1.2-1.6x PARTS_64's time on 3.8. next_n 8 large: TWO_WG took 0.891 / 0.920 of PARTS_64's time at B 64 / 128 C 64K on
3.8; on 3.9 taken from the SASS alone (no spills against 122), not timed. next_n 5 large (tuned.py: parts of 64
already) and next_n 8 small (TWO_WG already) keep tuned.py's on both.
"""
from .tuned import CUDA_TUNED


def _entries(changed: dict) -> dict:
    """tuned.py's entries under the keys `changed` names ({(live columns, size class): fields}), with those fields
    laid over the classes it names and every other field and class as tuned.py has it."""
    return {key: {size: {**entry, **changed.get((key, size), {})} for size, entry in CUDA_TUNED[key].items()}
            for key in {k for k, _ in changed}}


PARTS_64 = {"MMA_N": 64}  # tuned.py's parts of 128 at 3 math warpgroups (152 registers) spill on 3.8 / 3.9
TWO_WG = {"MATH_WG": 2, "MMA_N": 128, "AHEAD": True}  # parts of 128 at 2 math warpgroups of 232 registers, one ahead

BY_RELEASE: dict = {
    (3, 8): _entries({(320, "small"): TWO_WG, (384, "small"): TWO_WG, (384, "large"): TWO_WG,
                      (448, "small"): TWO_WG, (448, "large"): PARTS_64, (512, "large"): TWO_WG}),
    (3, 9): _entries({(320, "small"): PARTS_64, (384, "small"): TWO_WG, (384, "large"): TWO_WG,
                      (448, "small"): TWO_WG, (448, "large"): PARTS_64, (512, "large"): TWO_WG}),
}
