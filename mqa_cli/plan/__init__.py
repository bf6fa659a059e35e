"""The plan layer: the targets' datasheet facts, the triton releases' facts, the dispatch table `explain`
prints and the `--kernel NAME:KEY=VALUE` overrides. No torch, no triton: `explain` stays cheap."""
