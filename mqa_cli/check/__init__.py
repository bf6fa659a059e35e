"""Checks: the float32 / float64 references, verification against them, top-k recall."""
