"""Grading workers: the sandboxed harness and, later, the executors that run it."""
