"""Stand-ins for upstream services that cannot run here (vLLM needs a GPU).

Each speaks the upstream's exact HTTP protocol on 127.0.0.1 and is named a
stand-in wherever it is used, so no test pretends to run the real thing.
"""
