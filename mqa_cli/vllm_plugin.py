"""vLLM's plug-in: with MQA_LOGITS_AS_DEEP_GEMM=1 in the environment, `import deep_gemm` in every vLLM process gets
this library's stand-in (mqa_cli.deep_gemm), which serves DeepGEMM's MQA-logits names and forwards the rest.

vLLM calls each installed entry point of the group `vllm.general_plugins` (pyproject.toml names `register` there
as `mqa_logits`) in every process it starts, the engine core and each worker included, before it builds the model;
it imports deep_gemm on first use, after that. With VLLM_PLUGINS unset it calls every plug-in installed, so this one
does nothing, and says nothing, unless the variable asks for it. Called again in a process, it changes nothing and
logs nothing more.

Its one log line goes to the logger `vllm.plugins.mqa_logits`: vLLM's log configuration covers the `vllm` logger
tree, so the line appears in vLLM's own log (INFO, its default level); outside vLLM it follows Python's defaults.
"""
from __future__ import annotations

import logging
import os
import sys

ENV = "MQA_LOGITS_AS_DEEP_GEMM"
_log = logging.getLogger("vllm.plugins.mqa_logits")
_warned = False  # an unknown value of ENV is named once per process


def register() -> None:
    """The entry point vLLM calls: with MQA_LOGITS_AS_DEEP_GEMM=1, put the stand-in in place of deep_gemm in this
    process (a real deep_gemm imported before stays the one forwarded to); unset, empty or 0: nothing."""
    global _warned
    value = os.environ.get(ENV, "")
    if value in ("", "0"):
        return
    if value != "1":
        if not _warned:
            _warned = True
            _log.warning("%s=%r is neither 1 nor 0: deep_gemm left as it is (set it to 1 to serve DeepGEMM's "
                         "MQA-logits names from mqa-logits)", ENV, value)
        return
    from . import deep_gemm

    if sys.modules.get("deep_gemm") is deep_gemm:  # in place already: loaded twice, or the path trick is in use too
        return
    deep_gemm.install(child_processes=False)  # vLLM calls this in each process it starts: no PYTHONPATH needed
    _log.info("mqa-logits stands in for deep_gemm (%s=1): it serves %s; %s", ENV,
              ", ".join(deep_gemm.SERVED), deep_gemm.forwarded_to())
