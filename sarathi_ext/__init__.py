"""sarathi-ext: fair, latency-controllable scheduling for chunked-prefill LLM engines."""

__version__ = "0.1.0"
