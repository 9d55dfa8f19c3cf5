"""Project wiring: the `claims` plugin is loaded from its entry point; nothing else is needed here.

A reader can implement `pytest_claims_machine_info` in this file to name a machine or
add a fingerprint field the OS hides (see `claims/hookspecs.py`).
"""
