"""What starts an interaction: ``system.message`` then ``user.message`` (a typed prompt or an
autopilot nudge), and the session's model and mode changes."""

from __future__ import annotations

from datetime import datetime

from synth.events import EventLog, JSONDict, iso_offset
from synth.usage import Ledger

#: Text of an autopilot continuation ("nudge"). Readers of older logs (before
#: ``isAutopilotContinuation`` existed) detect nudges by the first sentence.
NUDGE_TEXT = (
    "You have not yet marked the task as complete using the task_complete tool. "
    "If you were planning, stop planning and start implementing. "
    "Keep working on your own until the task is finished, then call task_complete."
)

SYSTEM_PROMPT = (
    "You are a coding agent running in a terminal (synthetic stand-in for the Copilot CLI "
    "system prompt, which is 40-56 KB in real logs and written again before every user "
    "message)."
)
SUBAGENT_SYSTEM_PROMPT = (
    "You are a sub-agent that runs development commands and reports results briefly "
    "(synthetic stand-in for the sub-agent system prompt)."
)
_FILLER = (
    "\n- Prefer small, verifiable changes; read files before editing them; run the tests "
    "that cover the code you touched; report what you changed and why."
)


def padded(text: str, size: int) -> str:
    """``text`` made ``size`` characters long with house rules (unchanged when longer)."""
    if size <= len(text):
        return text
    reps = (size - len(text)) // len(_FILLER) + 1
    return (text + _FILLER * reps)[:size]


def transformed(content: str, ms: int) -> str:
    """A ``user.message``'s ``transformedContent``: the clock, then what the model reads."""
    return f"<current_datetime>{iso_offset(ms)}</current_datetime>\n\n{content}"


class Conversation(EventLog):
    """The log plus the conversation's state: model, mode, the open interaction and turn."""

    def __init__(
        self,
        *,
        seed: int,
        start: datetime | str,
        session_id: str | None,
        model: str,
        system_prompt_size: int,
    ) -> None:
        super().__init__(seed=seed, start=start, session_id=session_id)
        self._model = model
        self._mode = "interactive"
        self._system_prompt = padded(SYSTEM_PROMPT, system_prompt_size)
        self._interaction: str | None = None
        self._next_turn = 0
        self._open_turn: str | None = None
        self._ledger = Ledger()
        self.calls_written = {"main": 0, "subagent": 0}
        """The manifest of LLM calls written: main-agent turn starts, and sub-agent calls
        (one per step of a sub-agent, however its lines are marked): the truth a count must
        find in a clean log, kept apart from any reader."""

    @property
    def model(self) -> str:
        return self._model

    @property
    def mode(self) -> str:
        return self._mode

    def _system_message(self, interaction_id: str, *, after_ms: int) -> None:
        self.event(
            "system.message",
            {"role": "system", "content": self._system_prompt, "interactionId": interaction_id},
            after_ms=after_ms,
        )

    def _begin_interaction(self) -> str:
        if self._open_turn is not None:
            raise ValueError("a turn is still open: call end_turn() first")
        iid = self._uuid()
        self._interaction = iid
        self._next_turn = 0
        self._ledger.new_interaction()
        return iid

    def _prompt(self, content: str, shown: str, after_ms: int, extra: JSONDict) -> str:
        """``system.message`` then a ``user.message`` the model reads as ``shown``."""
        iid = self._begin_interaction()
        self._system_message(iid, after_ms=after_ms)
        data: JSONDict = {
            "content": content,
            "transformedContent": transformed(shown, self._clock + 6),
            "attachments": [],
            "supportedNativeDocumentMimeTypes": [],
            **extra,
            "delivery": "idle",
            "interactionId": iid,
            "parentAgentTaskId": self._uuid(),
        }
        self.event("user.message", data, after_ms=6)
        return iid

    def user_message(
        self, content: str, *, agent_mode: str | None = None, after_ms: int = 4000
    ) -> str:
        """A typed prompt: ``system.message`` then ``user.message``; returns the interactionId.

        ``agentMode`` is written when given, or when the session's mode (see
        :meth:`mode_changed`) is not "interactive" (interactive prompts carry none).
        """
        mode = agent_mode if agent_mode is not None else self._mode
        extra = {} if agent_mode is None and mode == "interactive" else {"agentMode": mode}
        return self._prompt(content, content, after_ms, extra)

    def nudge(self, *, flagged: bool = True, after_ms: int = 700) -> str:
        """An autopilot continuation (not typed by the user); returns the interactionId.

        ``flagged=False`` omits ``isAutopilotContinuation`` (logs before CLI 1.0.63, where only
        the text tells a nudge apart).
        """
        extra: JSONDict = {"agentMode": "autopilot"}
        if flagged:
            extra["isAutopilotContinuation"] = True
        return self._prompt("", NUDGE_TEXT, after_ms, extra)

    def mode_changed(self, new_mode: str, *, after_ms: int = 2000) -> None:
        self.event(
            "session.mode_changed",
            {"previousMode": self._mode, "newMode": new_mode},
            after_ms=after_ms,
        )
        self._mode = new_mode

    def model_change(self, new_model: str, *, after_ms: int = 1500) -> None:
        self.event(
            "session.model_change",
            {"previousModel": self._model, "newModel": new_model},
            after_ms=after_ms,
        )
        self._model = new_model
