"""Servers a benchmark runs against: vLLM (``vllm``), the package's test double (``mock``),
the server's own Prometheus accounting (``prometheus``), and the child-process plumbing a
launched server needs (``process``: cores, niceness, parent-death signal, ports, log tail)."""
