"""Runnable, tested code shown on the guide's pages."""
