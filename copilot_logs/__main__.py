"""``python -m copilot_logs``: the command line, as ``copilot-logs`` runs it."""

from copilot_logs.cli import main

main()
