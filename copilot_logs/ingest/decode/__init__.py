"""One line's bytes -> an event: the envelope, JSON repair, typed payload fields, and what the
CLI writes across its versions (:mod:`copilot_logs.ingest.decode.cli_format`)."""
