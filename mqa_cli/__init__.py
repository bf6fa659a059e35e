"""mqa-logits: the fp8 MQA-logits kernel (DeepSeek sparse attention's lightning indexer) as a library and CLI.

Heavy imports (torch, triton) are deferred so `explain --target ...` stays fast.
"""
__version__ = "0.1.0"


def fp8_mqa_logits(*args, **kwargs):
    """See mqa_cli.api.fp8_mqa_logits."""
    from .api import fp8_mqa_logits as impl

    return impl(*args, **kwargs)


def fp8_paged_mqa_logits(*args, **kwargs):
    """See mqa_cli.api.fp8_paged_mqa_logits."""
    from .api import fp8_paged_mqa_logits as impl

    return impl(*args, **kwargs)
