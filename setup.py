"""Package discovery; pyproject.toml holds everything else. kernels/ installs as mqa_kernels, a rename that
pyproject's find cannot express, so its packages are found here: a new folder with an __init__.py is packaged
without editing a list (tests/test_packaging.py checks the wheel)."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["mqa_cli", "mqa_cli.*"])
      + ["mqa_kernels"] + [f"mqa_kernels.{p}" for p in find_packages("kernels")],
      package_dir={"mqa_kernels": "kernels"},
      package_data={"mqa_cli.inspect": ["amd_figures.json"]})  # the AMD cost-model figures `explain` shows
