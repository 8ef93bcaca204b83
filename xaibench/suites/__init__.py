"""Suites: named lists of tracks (dataset x model) with their metrics."""
