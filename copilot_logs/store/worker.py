"""What the fork server of the worker processes imports first (see :mod:`copilot_logs.store.pool`).

Workers share the cores, so each keeps polars to one thread; and polars' allocator (jemalloc)
gives freed memory back after 100 ms instead of 10 s, so that a worker does not hold the memory
of the batches it has finished (pola-rs/polars#23128). Both must be set before polars is
loaded; a value the user set wins.
"""

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0")
