"""Presentation: the terminal views. The only layer that may import textual."""
