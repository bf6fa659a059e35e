"""Inspection: the plan's kernel compiled for any target, its asm and summaries, dumps, and the stored
codegen tables per triton release."""
