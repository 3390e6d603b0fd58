"""Diagnosis from raw observations (docs/diagnosis.md): acceptance against context length, thermal
attribution of slow stretches, seconds saved per answer, and the quality sentinel.

Each module holds a pure function (or a fixed-size fold) and its typed view; `DiagnosisView`
(views.py) gathers them for the session view and `watch --json`. Pure: no I/O, no clock.
"""
