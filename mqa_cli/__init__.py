"""mqa-logits: the fp8 MQA-logits kernel (DeepSeek sparse attention's lightning indexer) as a library and CLI.

The public functions live in mqa_cli.api.logits (and mqa_cli.api.topk) and are loaded on first use, so
`mqa-logits explain --target ...` imports neither torch nor triton; each is the real function, with its
real signature.
"""
__version__ = "0.1.0"

_API = ("fp8_mqa_logits", "fp8_fp4_mqa_logits", "mqa_logits", "fp8_paged_mqa_logits", "fp8_fp4_paged_mqa_logits",
        "get_paged_mqa_logits_metadata", "get_num_sms", "set_num_sms")
_TOPK = ("fp8_mqa_topk", "fp8_paged_mqa_topk")

__all__ = [*_API, *_TOPK]


def __getattr__(name: str):
    if name in _API:
        from .api import logits as module
    elif name in _TOPK:
        from .api import topk as module
    else:
        raise AttributeError(f"module 'mqa_cli' has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)  # later lookups skip this function (hot path)
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
