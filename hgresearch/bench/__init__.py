"""The measurement side: workloads, arrival schedules, the streaming client, the run loop.

* :mod:`hgresearch.bench.config` — :class:`~hgresearch.bench.config.BenchConfig` (one
  benchmark point's parameters), request headers, the resume rule;
* :mod:`hgresearch.bench.options` — the options' enums, parsers and checks (run before
  anything is written), for the command line and notebook parameters alike;
* :mod:`hgresearch.bench.prompts` — request specs (ShareGPT, random, synthetic, JSONL);
* :mod:`hgresearch.bench.schedule` — seeded absolute arrival times and precise sleeping;
* :mod:`hgresearch.bench.client`, :mod:`hgresearch.bench.fasthttp` — asyncio streaming client
  for OpenAI-compatible servers: one request -> one record;
* :mod:`hgresearch.bench.drive` — the request plan, the warm-up and the send loop;
* :mod:`hgresearch.bench.preflight` — the server asked before, after the warm-up and after a
  run, and why it could not serve;
* :mod:`hgresearch.bench.run_summary` — ``summary.json`` from the run folder's other files;
* :mod:`hgresearch.bench.runner` — :func:`~hgresearch.bench.runner.run_benchmark` and
  :func:`~hgresearch.bench.runner.run_qps_sweep`, the steps in order; the run folder is written
  through :mod:`hgresearch.data.runfolder` (file names, crash-safe ``requests.jsonl``,
  readers; the layout is in docs/measurement.md);
* :mod:`hgresearch.bench.telemetry` — the NVML sampler;
* :mod:`hgresearch.bench.server` — vLLM's lifecycle, its child process, the local streaming
  test server (a test double), the server's Prometheus counters;
* :mod:`hgresearch.bench.sweep` — server configurations x rates x repeats, here or on Ray;
* :mod:`hgresearch.bench.dummy_model` — catalog models built offline, served with dummy
  weights.
"""
