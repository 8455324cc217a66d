"""Benchmark problems with known optima and the immediate-regret runner."""
