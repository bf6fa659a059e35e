"""This variant's choices by triton release, laid over tuned.py's on that release alone
(mqa_kernels.common.tuned_by_triton.table): none today, tuned.py's hold on every release."""

BY_RELEASE: dict = {}
