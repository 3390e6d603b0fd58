"""Argument parsing and wiring: the only layer that knows every other layer."""
