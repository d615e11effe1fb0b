"""The session builder: ``session.start`` and the session-level events around the turns
(errors, aborts, compactions, usage checkpoints, shutdowns, resumes, ``!cmd`` escapes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from synth import usage
from synth.events import JSONDict, iso
from synth.turns import Turns


def _context(cwd: str, repository: str | None, branch: str | None, head: str) -> JSONDict:
    """``session.start``'s ``context``: the folder, and the repository when there is one."""
    context: JSONDict = {"cwd": cwd, "gitRoot": cwd}
    if repository is not None:
        context["repository"] = repository
        context["hostType"] = "github"
        context["repositoryHost"] = "github.com"
    if branch is not None:
        context["branch"] = branch
    context["headCommit"] = head
    return context


class SessionBuilder(Turns):
    """Appends real-shaped events to an in-memory ``events.jsonl``.

    The constructor writes ``session.start`` and ``session.model_change``. Then use the high
    level helpers (:meth:`user_message`, :meth:`turn`, :meth:`task_complete_turn`, ...) or the
    low level :meth:`event`. ``system_prompt_size`` pads each main-agent ``system.message`` to
    that many characters (real ones are 40-56 KB), for benchmark corpora.
    """

    def __init__(
        self,
        *,
        session_id: str | None = None,
        seed: int = 0,
        start: datetime | str = "2026-08-05T07:49:01.551Z",
        copilot_version: str = "1.0.78",
        model: str = "gpt-5-mini",
        cwd: str = "/home/dev/project",
        repository: str | None = "octo/project",
        branch: str | None = "main",
        system_prompt_size: int = 0,
    ) -> None:
        super().__init__(
            seed=seed,
            start=start,
            session_id=session_id,
            model=model,
            system_prompt_size=system_prompt_size,
        )
        self._cwd = cwd
        head = f"{self._rng.getrandbits(160):040x}"
        self.event(
            "session.start",
            {
                "sessionId": self._session_id,
                "version": 1,
                "producer": "copilot-agent",
                "copilotVersion": copilot_version,
                "startTime": iso(self._start_ms),
                "context": _context(cwd, repository, branch, head),
                "alreadyInUse": False,
            },
            after_ms=120,
        )
        self.event("session.model_change", {"newModel": model}, after_ms=400)

    def session_error(
        self,
        message: str,
        error_type: str = "query",
        status_code: int | None = None,
        *,
        after_ms: int = 6,
    ) -> None:
        data: JSONDict = {"errorType": error_type, "message": message}
        if status_code is not None:
            data["statusCode"] = status_code
        self.event("session.error", data, after_ms=after_ms)

    def abort(self, reason: str = "user initiated", *, after_ms: int = 50) -> None:
        self.event("abort", {"reason": reason}, after_ms=after_ms)

    def info(self, info_type: str, message: str, *, after_ms: int = 5) -> None:
        """``session.info`` (e.g. ``info_type="rewind"``)."""
        self.event("session.info", {"infoType": info_type, "message": message}, after_ms=after_ms)

    def compaction(self, tokens_removed: int, *, after_ms: int = 300) -> None:
        """``session.compaction_start`` then ``session.compaction_complete``.

        The compaction LLM call goes into tokenDetails and totalNanoAiu of the next shutdown,
        not into modelMetrics usage or requests.
        """
        pre = max(self._ledger.last_input, 0) + max(tokens_removed, 0) + 4_000
        post = pre - tokens_removed
        self.event("session.compaction_start", {}, after_ms=after_ms)
        c_in, c_out = pre, 900
        self._ledger.record_compaction(self._model, c_in, c_out)
        self.event(
            "session.compaction_complete",
            {
                "success": True,
                "preCompactionTokens": pre,
                "postCompactionTokens": post,
                "tokensRemoved": tokens_removed,
                "messagesRemoved": 12,
                "summaryContent": "<summary>Earlier work: read the code, made the first "
                "change, tests pass.</summary>",
                "compactionTokensUsed": {"input": c_in, "output": c_out, "cachedInput": 0},
            },
            after_ms=4_000,
        )

    def usage_checkpoint(
        self,
        total_nano_aiu: int | None = None,
        premium: float | None = None,
        *,
        after_ms: int = 150,
    ) -> None:
        """``session.usage_checkpoint``: running totals for the whole session (never decrease)."""
        nano, prem, _ = usage.totals(self._ledger.usage())
        expires = iso(self._clock + after_ms + 86_400_000)
        self.event(
            "session.usage_checkpoint",
            {
                "totalNanoAiu": nano if total_nano_aiu is None else total_nano_aiu,
                "totalPremiumRequests": usage.num(prem if premium is None else premium),
                "modelCacheState": [
                    {"modelId": m, "cacheExpiresAt": expires, "cacheTtlSeconds": 86_400}
                    for m in self._ledger.models_called()
                ],
            },
            after_ms=after_ms,
        )

    def model_metrics(self, *, per_segment: bool = False) -> JSONDict:
        """The ``modelMetrics`` a shutdown written now would carry."""
        return usage.model_metrics(self._ledger.usage(per_segment=per_segment))

    def shutdown(
        self,
        model_metrics: Mapping[str, Any] | None = None,
        *,
        premium_requests: float | None = None,
        nano_aiu: int | None = None,
        api_ms: int | None = None,
        lines_added: int = 0,
        lines_removed: int = 0,
        files_modified: Sequence[str] = (),
        token_details: Mapping[str, Any] | bool | None = None,
        per_segment: bool = False,
        shutdown_type: str = "routine",
        after_ms: int = 2000,
    ) -> None:
        """``session.shutdown``; ``eventsFileSizeBytes`` is the byte offset of this line.

        By default usage is cumulative for the whole session (CLI 1.0.7x); ``per_segment=True``
        reports only what happened since the previous shutdown (older CLIs). Explicit
        arguments override the computed figures. ``token_details``: None = computed when
        there was usage, False = omitted, True = computed, a mapping = written as is.
        """
        spent = self._ledger.usage(per_segment=per_segment)
        nano, prem, ms = usage.totals(spent)
        metrics = dict(model_metrics) if model_metrics is not None else usage.model_metrics(spent)
        data: JSONDict = {
            "shutdownType": shutdown_type,
            "totalPremiumRequests": usage.num(
                prem if premium_requests is None else premium_requests
            ),
            "totalNanoAiu": nano if nano_aiu is None else nano_aiu,
        }
        if isinstance(token_details, Mapping):
            data["tokenDetails"] = dict(token_details)
        elif token_details is True or (token_details is None and metrics):
            data["tokenDetails"] = usage.token_details(spent)
        data["totalApiDurationMs"] = ms if api_ms is None else api_ms
        data["sessionStartTime"] = self._start_ms
        data["eventsFileSizeBytes"] = self._size
        data["codeChanges"] = {
            "linesAdded": lines_added,
            "linesRemoved": lines_removed,
            "filesModified": list(files_modified),
        }
        data["modelMetrics"] = metrics
        if metrics:
            data["currentModel"] = self._model
        data.update(self._context_tokens())
        self.event("session.shutdown", data, after_ms=after_ms)
        self._ledger.close_segment()

    def _context_tokens(self) -> JSONDict:
        """The context window's figures at a shutdown, from the last main-agent call."""
        last_input = self._ledger.last_input
        system_tokens = 10_900 + len(self._system_prompt) // 4
        return {
            "currentTokens": max(last_input, system_tokens),
            "systemTokens": system_tokens,
            "conversationTokens": max(0, last_input - system_tokens),
            "toolDefinitionsTokens": 7_582,
        }

    def resume(self, *, after_ms: int = 60_000) -> None:
        """``session.resume`` with ``eventCount``/``eventsFileSizeBytes`` of the file before it.
        A turn still open (the run before was killed: the real CLI writes nothing then) stays
        open: no CLI version closes it on resume (tests/recordings/*/kill-resume)."""
        if after_ms < 1:
            raise ValueError("after_ms must be >= 1")
        self.event(
            "session.resume",
            {
                "resumeTime": iso(self._clock + after_ms),
                "eventCount": len(self._lines),
                "eventsFileSizeBytes": self._size,
                "selectedModel": self._model,
                "context": {"cwd": self._cwd, "gitRoot": self._cwd},
            },
            after_ms=after_ms,
        )
        self._open_turn = None

    def user_requested_shell(self, command: str, output: str, *, exit_code: int = 0) -> str:
        """A ``!cmd`` shell escape: ``tool.user_requested`` + a complete with no start."""
        cid = self._uuid()
        self.event(
            "tool.user_requested",
            {"toolCallId": cid, "toolName": "bash", "arguments": {"command": command}},
            after_ms=3000,
        )
        result = f"{output}\n<exited with exit code {exit_code}>"
        self.event(
            "tool.execution_complete",
            {
                "toolCallId": cid,
                "success": True,
                "result": {"content": result, "detailedContent": result},
                "isUserRequested": True,
            },
            after_ms=250,
        )
        return cid
