"""Triton and Gluon kernels for fp8 MQA logits, with their configs (import name: mqa_kernels), by op: prefill/,
decode/, topk/, and common/ for what they share."""
