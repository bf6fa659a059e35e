"""python -m mqa_cli: the same as the mqa-logits command."""
from .cli import console

console()
