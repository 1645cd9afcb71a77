"""Servers a benchmark runs against: vLLM (``vllm``), the package's test double (``mock``)
and the server's own Prometheus accounting (``prometheus``)."""
