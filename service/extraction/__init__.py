"""The write path: memories extracted from conversation turns and reconciled with what is known.

`hooks` queues a thread's job after an append, `triggers` decides when its new turns are worth
a pass, `passes` is what every pass shares (reading from the cursor, one transaction per
write), `pipeline` the extraction pass with the model (`prompt`: what the model is asked and the
strict schema it answers in; `resolver`: the deterministic rules that decide what is written),
`turns` turn storage without an LLM, `jobs` the worker's handlers, `record` the typed audit
records of passes and failures, `health` what an operator sees of it all, `recovery` the sweep
and reruns that queue stranded work again, and `compaction` the consolidation of a user's
facts. The rules are described in docs/write-path.md.
"""
