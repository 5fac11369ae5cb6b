"""The write path: memories extracted from conversation turns and reconciled with what is known.

`triggers` decides when a thread's new turns are worth a pass, `prompt` is what the model is
asked and the strict schema it answers in, `resolver` the deterministic rules that decide what
is written, `pipeline` the background passes (and turn storage without an LLM), `compaction`
the consolidation of a user's facts, `health` what an operator sees of it all.
"""
