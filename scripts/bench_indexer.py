"""The indexer end to end on the GPU (logits + top-k beside DeepGEMM's logits + torch.topk): see
mqa_cli/indexer_bench.py; the same as `mqa-logits bench --suite indexer`, with the sweep options."""
from mqa_cli.indexer_bench import main

if __name__ == "__main__":
    main()
