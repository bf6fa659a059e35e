"""Config-aware kernel names: what profilers, IR and asm show is `<base>_<KEY>_<value>...`.

Triton calls a `repr=` callback with the specialization; its `constants` map holds the
constexpr values, so the compiled symbol carries exactly the keys that make variants differ.
"""


def sanitize(value) -> str:
    """bool -> 0/1, None -> NONE, strings upper-cased with non-alphanumerics -> _."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return "NONE"
    if isinstance(value, (int, float)):
        return str(value).replace(".", "p").replace("-", "m")
    text = str(value).upper()
    return "".join(c if c.isalnum() else "_" for c in text)


def kernel_name(base: str, keys, values: dict) -> str:
    """The name a kernel compiled with `values` (constexprs by name) gets."""
    return base + "".join(f"_{k}_{sanitize(values[k])}" for k in keys if k in values)


def make_kernel_repr(base: str, keys):
    """A `repr=` callback for @triton.jit / @gluon.jit naming the kernel after its config keys."""

    def _repr(specialization) -> str:
        constants = getattr(specialization, "constants", None) or {}
        named = {}
        for key, value in constants.items():
            # Triton 3.6 keys constants by argument name; older releases by a path tuple.
            name = key if isinstance(key, str) else None
            if name is not None:
                named[name] = value
        return kernel_name(base, keys, named)

    return _repr
