"""What the fork server of the worker processes imports first (see :mod:`copilot_logs.store.pool`),
and what each worker does before any work (:func:`start`).

Before polars loads (a value the user set wins): one polars thread per worker, and jemalloc gives
freed memory back after 100 ms, not 10 s (pola-rs/polars#23128).
"""

import os
import signal
import threading
from multiprocessing.connection import Connection

os.environ.setdefault("POLARS_MAX_THREADS", "1")
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0")


def start(lifeline: Connection) -> None:
    """End this worker with the command: Ctrl-C is the command's to handle, and a thread ends
    this process when ``lifeline`` (a pipe only the command holds the other end of) closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch, args=(lifeline,), name="lifeline", daemon=True).start()


def _watch(lifeline: Connection) -> None:
    try:
        while True:
            lifeline.recv_bytes()  # nothing is ever sent: this returns only at the end
    except (EOFError, OSError):
        pass
    os._exit(1)
