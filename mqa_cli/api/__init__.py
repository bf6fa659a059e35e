"""The library's public functions (re-exported lazily by mqa_cli): logits in DeepGEMM's call forms, top-k,
set_num_sms, and the eager call's fast path."""
