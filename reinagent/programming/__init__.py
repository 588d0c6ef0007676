"""Programming benchmarks' shared parts: code extraction, prompts, the check-solutions verb."""
