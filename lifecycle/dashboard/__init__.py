"""The staff dashboard: selectors (a fixed number of queries whatever the volume), SVG charts, one view."""
