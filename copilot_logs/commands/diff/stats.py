"""The figures of ``diff``: median, P90, mean, and the exact tests (Mann-Whitney, Fisher).

Written here, by hand, so that no statistics library is needed at run time. Both tests are
exact (computed over every way the runs could have been split between the two sides, with
integers) where that is cheap, which is where it matters: a few runs a side. At 3 runs a side
the smallest two-sided p a Mann-Whitney test can give is 2/20 = 0.10, whatever the values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import groupby

EXACT_UP_TO = 50
"""Runs in all (both sides) up to which the Mann-Whitney p is exact; beyond, the normal
approximation with the tie and continuity corrections (within about 0.01 there)."""

EXACT = "exact"
NORMAL = "normal"


def median(values: Sequence[float]) -> float | None:
    """The middle value (the mean of the two middle ones for an even count); None for none."""
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile: the smallest value that at least ``share`` of the values
    are at or below (P90 of 1..10 is 9); always a value that was seen. None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return float(ordered[rank - 1])


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def mann_whitney(base: Sequence[float], candidate: Sequence[float]) -> tuple[float, str] | None:
    """The two-sided p of the Mann-Whitney U test, and how it was found (``exact`` or
    ``normal``); None when a side has no value.

    Two-sided: the chance, were both sides drawn from one population, of a U at least as far
    from its mean (n1 n2 / 2) as the one seen. Exact (the permutation distribution of U given
    the ties, counted with integers) up to :data:`EXACT_UP_TO` runs in all.
    """
    if not base or not candidate:
        return None
    n1, n2 = len(base), len(candidate)
    groups = _tie_groups(base, candidate)
    doubled = _doubled_u(groups)
    if n1 + n2 <= EXACT_UP_TO:
        return _exact_p(groups, n1, n2, doubled), EXACT
    return _normal_p(groups, n1, n2, doubled), NORMAL


def _tie_groups(base: Sequence[float], candidate: Sequence[float]) -> list[tuple[int, int]]:
    """The values of both sides in ascending order, as (how many of base, how many in all)
    per distinct value."""
    tagged = sorted([(value, 1) for value in base] + [(value, 0) for value in candidate])
    return [
        (sum(tag for _, tag in members), len(members))
        for members in (list(g) for _, g in groupby(tagged, key=lambda pair: pair[0]))
    ]


def _doubled_u(groups: list[tuple[int, int]]) -> int:
    """2U of the base side: each base value beats every candidate value below it, and ties
    count half."""
    below = 0  # candidate values so far
    doubled = 0
    for from_base, size in groups:
        ties = size - from_base
        doubled += from_base * (2 * below + ties)
        below += ties
    return doubled


def _exact_p(groups: list[tuple[int, int]], n1: int, n2: int, seen: int) -> float:
    """Over every choice of which n1 of the values are the base side's (the tie groups kept),
    the share whose 2U lies at least as far from n1 n2 as ``seen``.

    Dynamic programming over the tie groups: for each count of base values placed so far, the
    number of ways to reach each 2U, held as one big integer (a polynomial in 2U with each
    coefficient in its own field of bits), so shifting and adding are single integer steps.
    """
    width = math.comb(n1 + n2, n1).bit_length() + 1
    mask = (1 << width) - 1
    ways = [0] * (n1 + 1)  # ways[k]: polynomial over 2U with k base values placed
    ways[0] = 1
    placed = 0
    for _, size in groups:
        after = [0] * (n1 + 1)
        for taken, poly in enumerate(ways):
            if not poly:
                continue
            below = placed - taken  # candidate values before this group
            for here in range(min(size, n1 - taken) + 1):
                shift = here * (2 * below + size - here)
                after[taken + here] += (poly * math.comb(size, here)) << (shift * width)
        ways = after
        placed += size
    centre = n1 * n2
    far = abs(seen - centre)
    poly = ways[n1]
    extreme = 0
    doubled = 0
    while poly:
        count = poly & mask
        if count and abs(doubled - centre) >= far:
            extreme += count
        poly >>= width
        doubled += 1
    return min(1.0, extreme / math.comb(n1 + n2, n1))


def _normal_p(groups: list[tuple[int, int]], n1: int, n2: int, doubled: int) -> float:
    total = n1 + n2
    ties = sum(size**3 - size for _, size in groups)
    variance = n1 * n2 / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0
    distance = max(0.0, abs(doubled / 2 - n1 * n2 / 2) - 0.5)
    return min(1.0, math.erfc(distance / math.sqrt(variance) / math.sqrt(2)))


def fisher_exact(base_yes: int, base_no: int, candidate_yes: int, candidate_no: int) -> float:
    """The two-sided p of Fisher's exact test on the 2x2 table of the two sides' yes / no
    counts: the chance, the margins held, of a table no more likely than the one seen. The
    tables' weights are compared as integers, so no rounding decides a tie."""
    base = base_yes + base_no
    yes = base_yes + candidate_yes
    total = base + candidate_yes + candidate_no
    if total == 0:
        return 1.0
    no = total - yes

    def weight(k: int) -> int:  # tables with k of the base side's runs a yes
        return math.comb(yes, k) * math.comb(no, base - k)

    seen = weight(base_yes)
    low, high = max(0, base - no), min(base, yes)
    extreme = sum(w for w in map(weight, range(low, high + 1)) if w <= seen)
    return min(1.0, extreme / math.comb(total, base))
