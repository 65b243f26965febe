"""Reconstruction attacks on DC-QE intermediate representations, as an honest-but-curious analyst would run them.

Each attack returns its reconstruction; :mod:`collabcausal.attacks.metrics` scores it against the
truth and against the public-midpoint baseline. They measure what the representations leak; they
are not used by any study.
"""
