"""The `--kernel NAME:KEY=VALUE,...` overrides: the spec split, each value typed like the config's own, and a
config with constexprs / launch options / schedule entries replaced by name. No torch, no triton: dispatch
rebuilds a row's config with them (`explain --kernel`, `run`), and dump compiles any of them."""
from __future__ import annotations

from dataclasses import replace

from ..errors import UserError


# Options a config override may set (besides the config's own constexprs and schedule keys).
OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu", "matrix_instr_nonkdim", "kpack",
               "enable_fp_fusion")


def _parse_value(text: str, current):
    low = text.strip().lower()
    if isinstance(current, bool) or low in ("true", "false"):
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UserError(f"expected a boolean (0/1/true/false), got {text!r}")
    if low in ("none", "null"):
        return None
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def split_kernel_spec(spec: str | None) -> tuple[str | None, dict]:
    """'tiled:BLOCK_KV=128,num_warps=8' -> ('tiled', {'BLOCK_KV': '128', 'num_warps': '8'}); ':num_warps=8' -> (None, ...)."""
    if spec is None:
        return None, {}
    name, _, rest = spec.partition(":")
    overrides = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UserError(f"bad override {item!r} in {spec!r}; write KEY=VALUE, e.g. tiled:BLOCK_KV=128,num_warps=8")
        overrides[key.strip()] = value.strip()
    return (name.strip() or None), overrides


def key_values(text: str) -> dict:
    """'K=V,K2=V2' -> {K: V typed as bool / int / float / str}: the override keys of a config, as `--kernel` takes
    them after the row name (the A/B scripts name their variants so)."""
    return {k: _parse_value(v, None) for k, v in split_kernel_spec(":" + text)[1].items()}


def parse_overrides(cfg, overrides: dict) -> dict:
    """{KEY: text} -> {KEY: value}, each typed like the config's own value of that key (constexpr, launch option or
    schedule entry), or read as a bool / int / float where the config has none."""
    known = {**cfg.schedule, **cfg.options, **cfg.constexprs}
    return {k: _parse_value(text, known.get(k)) for k, text in overrides.items()}


def apply_overrides(cfg, overrides: dict):
    """A KernelConfig with constexprs / launch options / schedule entries replaced by name."""
    if not overrides:
        return cfg
    constexprs, options, schedule = dict(cfg.constexprs), dict(cfg.options), dict(cfg.schedule)
    for key, text in overrides.items():
        if key in constexprs:
            constexprs[key] = _parse_value(text, constexprs[key])
        elif key in options or key in OPTION_KEYS:
            options[key] = _parse_value(text, options.get(key))
        elif key in schedule:
            schedule[key] = _parse_value(text, schedule[key])
        else:
            known = list(constexprs) + sorted(set(options) | set(OPTION_KEYS)) + list(schedule)
            raise UserError(f"unknown config key {key!r} for {cfg.kernel}; choose from {', '.join(known)}")
    return replace(cfg, constexprs=constexprs, options=options, schedule=schedule)
