"""Detectors over derived numbers: the vanilla-speed flag per request, periodic degradation."""
