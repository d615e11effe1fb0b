"""What the real Copilot CLI did when it resumed each damaged log: generated from
tests/recordings/VERSION/resume-DAMAGE/truth.json by ``python -m rig.resume --evidence``
(``make record-resume``); do not edit by hand (tests/test_doctor.py checks it)."""

# ruff: noqa: E501  (generated: the CLI's messages are kept whole)

from typing import Any

VERSIONS = ("1.0.20", "1.0.40", "1.0.60", "1.0.78", "1.0.85", "1.0.102")
DAMAGES: dict[str, str] = {
    "none": "the recording as it is (the control)",
    "kill-9": "SIGKILL to the CLI while its tool runs (a real run)",
    "cut-last-line": "the last line cut in half, no newline",
    "nul-tail": "4 KiB of NUL bytes after the last line",
    "glued-line": "the first assistant.turn_end cut in half, the next event glued behind it",
    "raw-newline": "a raw newline inside the first user.message (one event on two lines)",
    "u2028": "a raw U+2028 inside the first user.message's content",
    "orphan-request": "ends after an assistant.message asking for a tool (never started)",
    "orphan-start": "ends after a tool.execution_start (the tool never completed)",
    "orphan-mid": "a tool.execution_complete removed, the session going on after it",
    "no-shutdown": "the session.shutdown removed",
    "invalid-utf8": "a byte 0xFF (not UTF-8) inside the first user.message's content",
    "blank-line": "an empty line after the first user.message",
    "duplicate-line": "the first assistant.turn_start written twice (one event id on two lines)",
}
OUTCOMES: dict[str, dict[str, str]] = {
    "none": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "kill-9": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "cut-last-line": {
        "1.0.20": "refused",
        "1.0.40": "refused",
        "1.0.60": "refused",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "nul-tail": {
        "1.0.20": "refused",
        "1.0.40": "refused",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "glued-line": {
        "1.0.20": "refused",
        "1.0.40": "refused",
        "1.0.60": "refused",
        "1.0.78": "refused",
        "1.0.85": "refused",
        "1.0.102": "resumed-dropping",
    },
    "raw-newline": {
        "1.0.20": "refused",
        "1.0.40": "refused",
        "1.0.60": "refused",
        "1.0.78": "refused",
        "1.0.85": "refused",
        "1.0.102": "history-lost",
    },
    "u2028": {
        "1.0.20": "refused",
        "1.0.40": "refused",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "orphan-request": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "orphan-start": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "orphan-mid": {
        "1.0.20": "unanswered-tool-call",
        "1.0.40": "unanswered-tool-call",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "no-shutdown": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "invalid-utf8": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "history-lost",
    },
    "blank-line": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "duplicate-line": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
}
# What each version did beyond the outcome: per damage, each note and its versions.
_NOTES: dict[str, dict[str, tuple[str, ...]]] = {
    "kill-9": {
        'answered the open call in the request only: "The execution of this tool, or a previous tool was interrupted."': (
            "1.0.20",
            "1.0.40",
            "1.0.60",
            "1.0.78",
            "1.0.85",
        ),
        "wrote a tool.execution_complete (error code interrupted) for the open call": ("1.0.102",),
    },
    "cut-last-line": {
        "exit 1, no model call: nothing on stderr": ("1.0.20", "1.0.40"),
        "exit 1, no model call: Error: Session file is corrupted (line 15: SyntaxError: Unterminated string in JSON at position 337 (line 1 column 338))": (
            "1.0.60",
        ),
        "rewrote the log": ("1.0.78", "1.0.85", "1.0.102"),
    },
    "nul-tail": {
        "exit 1, no model call: nothing on stderr": ("1.0.20", "1.0.40"),
        "rewrote the log": ("1.0.78", "1.0.85", "1.0.102"),
    },
    "glued-line": {
        "exit 1, no model call: nothing on stderr": ("1.0.20", "1.0.40"),
        "exit 1, no model call: Error: Session file is corrupted (line 11: SyntaxError: Expected ',' or '}' after property value in JSON at position 94 (line 1 column 95))": (
            "1.0.60",
        ),
        "exit 1, no model call: Error: Session file is corrupted (line 9: expected `,` or `}` at line 1 column 95)": (
            "1.0.78",
        ),
        "exit 1, no model call: Error: Session file is corrupted (line 8: expected `,` or `}` at line 1 column 95)": (
            "1.0.85",
        ),
        "rewrote the log; dropped line 9 (assistant.turn_start)": ("1.0.102",),
    },
    "raw-newline": {
        "exit 1, no model call: nothing on stderr": ("1.0.20", "1.0.40"),
        "exit 1, no model call: Error: Session file is corrupted (line 4: SyntaxError: Unterminated string in JSON at position 161 (line 1 column 162))": (
            "1.0.60",
        ),
        "exit 1, no model call: Error: Session file is corrupted (line 4: EOF while parsing a string at line 1 column 161)": (
            "1.0.78",
        ),
        "exit 1, no model call: Error: Session file is corrupted (line 2: EOF while parsing a string at line 1 column 161)": (
            "1.0.85",
        ),
        "rewrote the log; dropped line 2 (user.message); the first prompt was not in the request": (
            "1.0.102",
        ),
    },
    "u2028": {"exit 1, no model call: nothing on stderr": ("1.0.20", "1.0.40")},
    "orphan-request": {
        'answered the open call in the request only: "The execution of this tool, or a previous tool was interrupted."': (
            "1.0.20",
            "1.0.40",
            "1.0.60",
            "1.0.78",
            "1.0.85",
        ),
        "wrote a tool.execution_complete (error code interrupted) for the open call": ("1.0.102",),
    },
    "orphan-start": {
        'answered the open call in the request only: "The execution of this tool, or a previous tool was interrupted."': (
            "1.0.20",
            "1.0.40",
            "1.0.60",
            "1.0.78",
            "1.0.85",
        ),
        "wrote a tool.execution_complete (error code interrupted) for the open call": ("1.0.102",),
    },
    "orphan-mid": {
        "sent tool calls without results: ['call_rig_1_0']": ("1.0.20", "1.0.40"),
        'answered the open call in the request only: "The execution of this tool, or a previous tool was interrupted."': (
            "1.0.60",
            "1.0.78",
            "1.0.85",
            "1.0.102",
        ),
    },
    "invalid-utf8": {
        "rewrote the log; dropped line 2 (user.message); the first prompt was not in the request": (
            "1.0.102",
        )
    },
}
NOTES: dict[str, dict[str, str]] = {
    damage: {version: note for note, versions in by_note.items() for version in versions}
    for damage, by_note in _NOTES.items()
}
REPAIRED: dict[str, dict[str, str]] = {
    "none": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "kill-9": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "cut-last-line": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "nul-tail": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "glued-line": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "raw-newline": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "u2028": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "orphan-request": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "orphan-start": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "orphan-mid": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "no-shutdown": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "invalid-utf8": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "blank-line": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
    "duplicate-line": {
        "1.0.20": "resumed",
        "1.0.40": "resumed",
        "1.0.60": "resumed",
        "1.0.78": "resumed",
        "1.0.85": "resumed",
        "1.0.102": "resumed",
    },
}
CLOSE_VERSION = "1.0.102"
CLOSE_TOOL: dict[str, Any] = {
    "model": "resumed",
    "interactionId": "resume",
    "success": False,
    "error": {
        "message": "Tool execution was interrupted before a result was recorded. Its "
        "effects may be absent, partial, or already complete, and other tools "
        "may have completed successfully. Check the current state before "
        "retrying; do not assume success or replay this operation blindly.",
        "code": "interrupted",
    },
}
CLOSE_WARNING: dict[str, Any] = {
    "warningType": "interrupted_tools",
    "message": "1 tool call(s) had no recorded result at resume. Files or other state may be "
    "partially changed. Completed tool results were retained; unresolved operations "
    "were not automatically retried. Verify the current state before continuing.",
}
