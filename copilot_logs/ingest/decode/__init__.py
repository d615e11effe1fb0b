"""One line's bytes -> an event: the envelope, JSON repair, typed payload fields."""
