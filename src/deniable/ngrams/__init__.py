"""Bayesian DP release of n-gram distributions with a public prior."""
