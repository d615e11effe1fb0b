"""Bytes on disk -> the events frame: find the logs, split lines, name the damage, decode."""
