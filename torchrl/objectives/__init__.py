"""Losses and value estimators."""
