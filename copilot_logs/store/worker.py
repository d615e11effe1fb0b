"""What the fork server of the worker processes imports first (see :mod:`copilot_logs.store.pool`),
and what each worker does before any work (:func:`start`).

Workers share the cores, so each keeps polars to one thread; and polars' allocator (jemalloc)
gives freed memory back after 100 ms instead of 10 s, so that a worker does not hold the memory
of the batches it has finished (pola-rs/polars#23128). Both must be set before polars is
loaded; a value the user set wins.
"""

import os
import signal
import threading
from multiprocessing.connection import Connection

os.environ.setdefault("POLARS_MAX_THREADS", "1")
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0")


def start(lifeline: Connection) -> None:
    """Make this worker end with the command that started it: Ctrl-C is the command's to
    handle (it then ends its workers), and a thread waits on ``lifeline``, a pipe whose other
    end only the command holds, and ends this process when it closes: when the command is done,
    fails, or is killed, even by SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch, args=(lifeline,), name="lifeline", daemon=True).start()


def _watch(lifeline: Connection) -> None:
    try:
        while True:
            lifeline.recv_bytes()  # nothing is ever sent: this returns only at the end
    except (EOFError, OSError):
        pass
    os._exit(1)
