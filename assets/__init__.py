"""Example asset code for the demo code location (``definitions.py``)."""
