"""The measurement side: workloads, arrival schedules, the streaming client, the run loop.

* :mod:`hgresearch.bench.prompts` — request specs (ShareGPT, random, synthetic, JSONL);
* :mod:`hgresearch.bench.schedule` — seeded absolute arrival times and precise sleeping;
* :mod:`hgresearch.bench.client` — asyncio streaming client for OpenAI-compatible servers;
* :mod:`hgresearch.bench.options` — the options' enums, parsers and checks (run before
  anything is written);
* :mod:`hgresearch.bench.runner` — :class:`BenchConfig`, :func:`run_benchmark`,
  :func:`run_qps_sweep`; it writes the run folder through :mod:`hgresearch.data.runfolder` (file
  names, crash-safe ``requests.jsonl``, readers; the layout is in docs/measurement.md);
* :mod:`hgresearch.bench.server.mock` — a local streaming server (a test double).
"""
