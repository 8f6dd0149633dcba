"""The grading harness: trusted grader, warm zygote, sandboxed student processes."""
