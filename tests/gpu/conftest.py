"""The card's checks as tests: every test under tests/gpu carries the `gpu` marker and is skipped without a CUDA
device, so the README's CPU run collects and skips them; a GPU machine runs `python -m pytest -m gpu -n 8 -q tests/gpu`
(tools/h200_check.sh's `gpu` step)."""
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason="needs a CUDA GPU (pytest -m gpu on the card)")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if skip is not None:
                item.add_marker(skip)
