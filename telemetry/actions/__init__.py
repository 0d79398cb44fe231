"""Telemetry's actions: the samples stored and rolled up into minutes and hours (storage)."""
