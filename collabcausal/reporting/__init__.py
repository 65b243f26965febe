"""Self-contained HTML reports of simulations and studies.

:mod:`~collabcausal.reporting.document` defines the report document (a JSON-ready dict) and
builds it for a served study (a simulation builds its own from the same pieces in
:mod:`collabcausal.simulations.report`: nothing here imports the simulations);
:mod:`~collabcausal.reporting.figures` draws its figures; :mod:`~collabcausal.reporting.html`
renders it into one HTML file that needs no network access to view (inline CSS, figures as inline
SVG).
"""
