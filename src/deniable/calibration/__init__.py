"""Choosing epsilon: plausible-deniability statistics, privacy ratio, epsilon selection, reports."""
