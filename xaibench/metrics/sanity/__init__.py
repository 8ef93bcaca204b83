"""Sanity checks (Adebayo et al. 2018, DESIGN 4b): reported and flagged, never ranked."""
