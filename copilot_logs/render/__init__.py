"""Frames and reports -> text: tables, timelines, CI formats, SVG and HTML (the one output
gate)."""
