"""Usage accounting, synthetic but self-consistent: what ``modelMetrics``, ``tokenDetails``,
``totalNanoAiu`` and ``totalPremiumRequests`` of a shutdown or checkpoint say.

The :class:`Ledger` records every LLM call (main agent and sub-agents) per model; the
compaction call goes into ``tokenDetails`` and ``totalNanoAiu``, not into usage or requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

JSONDict = dict[str, Any]

#: Premium-request multiplier per model, used for the synthetic usage figures.
PREMIUM_MULTIPLIER: dict[str, float] = {
    "gpt-5-mini": 0.0,
    "gpt-4.1": 0.0,
    "gpt-4o": 0.0,
    "claude-haiku-4.5": 0.33,
    "claude-sonnet-4": 1.0,
    "claude-sonnet-4.5": 1.0,
    "gpt-5": 1.0,
    "claude-opus-4.1": 10.0,
}

#: The fields a shutdown's session-wide ``tokenDetails`` adds up over the models.
_TOKEN_FIELDS = ("input", "cache_read", "cache_write", "output", "compact_input", "compact_output")


@dataclass
class _Usage:
    requests: int = 0
    cost: float = 0.0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    nano: int = 0
    api_ms: int = 0
    # The compaction call: in tokenDetails and totalNanoAiu, not in usage or requests.
    compact_input: int = 0
    compact_output: int = 0
    compact_nano: int = 0

    def minus(self, other: _Usage) -> _Usage:
        return _Usage(
            **{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)}
        )

    def copy(self) -> _Usage:
        return _Usage(**{f.name: getattr(self, f.name) for f in fields(self)})

    def empty(self) -> bool:
        return self.requests == 0 and self.compact_input == 0 and self.compact_output == 0

    def token_details(self) -> JSONDict:
        return {
            "input": {
                "tokenCount": self.input - self.cache_read - self.cache_write + self.compact_input
            },
            "cache_read": {"tokenCount": self.cache_read},
            "cache_write": {"tokenCount": self.cache_write},
            "output": {"tokenCount": self.output + self.compact_output},
        }

    def metrics(self) -> JSONDict:
        """This model's entry of ``modelMetrics``."""
        return {
            "requests": {"count": self.requests, "cost": num(self.cost)},
            "usage": {
                "inputTokens": self.input,
                "outputTokens": self.output,
                "cacheReadTokens": self.cache_read,
                "cacheWriteTokens": self.cache_write,
                "reasoningTokens": self.reasoning,
            },
            "totalNanoAiu": self.nano + self.compact_nano,
            "tokenDetails": self.token_details(),
        }


def nano_aiu(uncached: int, cache_read: int, output: int) -> int:
    return uncached * 25_000 + cache_read * 2_500 + output * 200_000


def num(x: float) -> int | float:
    """Whole numbers as ints (the CLI writes ``0``, not ``0.0``)."""
    return int(x) if float(x).is_integer() else round(x, 4)


class Ledger:
    """Usage per model since the session started, and as of the last shutdown."""

    def __init__(self) -> None:
        self._usage: dict[str, _Usage] = {}
        self._at_last_shutdown: dict[str, _Usage] = {}
        self._calls_in_interaction = 0
        self._charged_interaction: str | None = None
        #: Input tokens of the last main-agent call (the context a shutdown reports).
        self.last_input = 0

    def new_interaction(self) -> None:
        """A prompt or nudge begins: its first main-agent call reads nothing from the cache."""
        self._calls_in_interaction = 0

    def record_call(
        self,
        model: str,
        output_tokens: int,
        duration_ms: int,
        *,
        context_bytes: int,
        interaction: str | None,
        main: bool,
    ) -> None:
        """One LLM call whose input grows with the log (``context_bytes`` written so far).

        A main-agent call charges the model's premium multiplier once per interaction.
        """
        u = self._usage.setdefault(model, _Usage())
        input_tokens = 6_000 + context_bytes // 6
        cache_read = 0
        if self._calls_in_interaction > 0 or not main:
            cache_read = (input_tokens * 3 // 5) // 128 * 128
        u.requests += 1
        u.input += input_tokens
        u.output += output_tokens
        u.cache_read += cache_read
        u.reasoning += output_tokens // 3
        u.nano += nano_aiu(input_tokens - cache_read, cache_read, output_tokens)
        u.api_ms += duration_ms
        if main:
            self._calls_in_interaction += 1
            self.last_input = input_tokens
            if interaction is not None and self._charged_interaction != interaction:
                self._charged_interaction = interaction
                u.cost += PREMIUM_MULTIPLIER.get(model, 1.0)

    def record_compaction(self, model: str, input_tokens: int, output_tokens: int) -> None:
        u = self._usage.setdefault(model, _Usage())
        u.compact_input += input_tokens
        u.compact_output += output_tokens
        u.compact_nano += nano_aiu(input_tokens, 0, output_tokens)

    def tokens(self) -> int:
        """Input plus output tokens of every call so far (a sub-agent's ``totalTokens``)."""
        return sum(u.input + u.output for u in self._usage.values())

    def models_called(self) -> list[str]:
        return [m for m, u in self._usage.items() if u.requests]

    def usage(self, *, per_segment: bool = False) -> dict[str, _Usage]:
        """Per model: the whole session, or only what happened since the last shutdown."""
        if not per_segment:
            return self._usage
        return {
            m: u.minus(self._at_last_shutdown[m]) if m in self._at_last_shutdown else u.copy()
            for m, u in self._usage.items()
        }

    def close_segment(self) -> None:
        """A shutdown was written: the next segment starts from here."""
        self._at_last_shutdown = {m: u.copy() for m, u in self._usage.items()}


def totals(usage: Mapping[str, _Usage]) -> tuple[int, float, int]:
    """``totalNanoAiu``, premium requests and API milliseconds over the models."""
    nano = sum(u.nano + u.compact_nano for u in usage.values())
    premium = sum(u.cost for u in usage.values())
    api_ms = sum(u.api_ms for u in usage.values())
    return nano, premium, api_ms


def model_metrics(usage: Mapping[str, _Usage]) -> JSONDict:
    """``modelMetrics``: one entry per model that made a call or a compaction."""
    return {model: u.metrics() for model, u in usage.items() if not u.empty()}


def token_details(usage: Mapping[str, _Usage]) -> JSONDict:
    """A shutdown's ``tokenDetails``: every model's tokens added up."""
    total = _Usage()
    for u in usage.values():
        for k in _TOKEN_FIELDS:
            setattr(total, k, getattr(total, k) + getattr(u, k))
    return total.token_details()
