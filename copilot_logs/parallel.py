"""Spreading files over worker processes: both cores when there are many files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def worker_count(jobs: int) -> int:
    return max(1, min(os.cpu_count() or 1, jobs))


def balance(items: Sequence[T], sizes: Sequence[int], count: int) -> list[list[T]]:
    """Split items into at most ``count`` non-empty batches of about equal total size, biggest
    first, so that one huge file does not leave the other workers idle at the end."""
    batches: list[list[T]] = [[] for _ in range(max(1, count))]
    loads = [0] * len(batches)
    for size, item in sorted(zip(sizes, items, strict=True), key=lambda pair: -pair[0]):
        lightest = loads.index(min(loads))
        batches[lightest].append(item)
        loads[lightest] += size
    return [batch for batch in batches if batch]
