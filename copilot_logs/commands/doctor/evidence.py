"""What the real Copilot CLI did when it resumed each damaged log: generated from
tests/recordings/VERSION/resume-DAMAGE/truth.json by ``python -m rig.resume --evidence``
(``make record-resume``); do not edit by hand (tests/test_doctor_evidence.py checks it)."""

from typing import Any

VERSIONS = ("1.0.85", "1.0.102")
OUTCOMES: dict[str, dict[str, str]] = {
    "none": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "kill-9": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "cut-last-line": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "nul-tail": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "glued-line": {"1.0.85": "refused", "1.0.102": "resumed"},
    "raw-newline": {"1.0.85": "refused", "1.0.102": "history-lost"},
    "u2028": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "orphan-request": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "orphan-start": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "orphan-mid": {"1.0.85": "resumed", "1.0.102": "resumed"},
    "no-shutdown": {"1.0.85": "resumed", "1.0.102": "resumed"},
}
NOTES: dict[str, dict[str, str]] = {
    "none": {"1.0.85": "", "1.0.102": ""},
    "kill-9": {
        "1.0.85": 'answered the open call in the request only: "The execution of this '
        'tool, or a previous tool was interrupted."',
        "1.0.102": "wrote a tool.execution_complete (error code interrupted) for the open call",
    },
    "cut-last-line": {"1.0.85": "rewrote the log", "1.0.102": "rewrote the log"},
    "nul-tail": {"1.0.85": "rewrote the log", "1.0.102": "rewrote the log"},
    "glued-line": {
        "1.0.85": "exit 1, no model call: Error: Session file is corrupted (line 8: "
        "expected `,` or `}` at line 1 column 95)",
        "1.0.102": "rewrote the log",
    },
    "raw-newline": {
        "1.0.85": "exit 1, no model call: Error: Session file is corrupted (line 2: "
        "EOF while parsing a string at line 1 column 161)",
        "1.0.102": "rewrote the log; the first prompt was not in the request",
    },
    "u2028": {"1.0.85": "", "1.0.102": ""},
    "orphan-request": {
        "1.0.85": 'answered the open call in the request only: "The execution of '
        'this tool, or a previous tool was interrupted."',
        "1.0.102": "wrote a tool.execution_complete (error code interrupted) for the open call",
    },
    "orphan-start": {
        "1.0.85": 'answered the open call in the request only: "The execution of '
        'this tool, or a previous tool was interrupted."',
        "1.0.102": "wrote a tool.execution_complete (error code interrupted) for the open call",
    },
    "orphan-mid": {
        "1.0.85": 'answered the open call in the request only: "The execution of this '
        'tool, or a previous tool was interrupted."',
        "1.0.102": 'answered the open call in the request only: "The execution of this '
        'tool, or a previous tool was interrupted."',
    },
    "no-shutdown": {"1.0.85": "", "1.0.102": ""},
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
