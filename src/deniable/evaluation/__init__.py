"""Evaluation: downstream utility of privatized text and membership-inference risk."""
