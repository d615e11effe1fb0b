"""The recording rig: the real Copilot CLI, run offline against a scripted model server of our
own, writes the session logs that tests/recordings/ keeps (docs/recordings.md).

Not shipped (like synth/): ``server`` is the model server and its record of what it served,
``replies`` fills a tool call's arguments from the tool's own schema, ``scenarios`` are the
scripts, ``cli`` fetches a CLI version from the npm registry, and ``record`` runs a scenario;
``damage`` damages a recording the ways users' logs are damaged, and ``resume`` resumes the
damaged (and the repaired) log with the real CLI and keeps what it did (docs/doctor.md).
"""
