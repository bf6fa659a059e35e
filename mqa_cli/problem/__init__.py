"""The problem layer: what a problem is (sizes, windows, counts, the padded logits rows, the Shape dispatch
reads), its tensors and files, and the built-in shapes. It imports nothing of mqa_cli but errors."""
