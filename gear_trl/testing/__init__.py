"""Support for tests, demos and the data scripts; the library itself never imports it.

`tiny`: the tiny Qwen3 stand-in (a byte-level BPE tokenizer trained on synthetic text, a random-weight model of any
small size). The committed `data/tiny-qwen3*` models were built with it (`data/scripts/make_tiny_model.py`,
`data/scripts/make_warm_start.py`), and tests build models of other sizes the same way.

`vllm_standin`: a stand-in for vLLM's offline engine, under which TRL's colocated vLLM generation runs on CPU
(tests/testing/test_vllm_standin.py).
"""
