"""Which Ray test modules run in a pytest of their own when the whole suite runs
(tests/integration/test_ray_isolated.py says why; conftest.py deselects their in-process
copies)."""

RAY_ISOLATED_MODULES = ("tests/integration/test_executors.py",
                        "tests/integration/test_sweep_ray.py")
#: Set in that child pytest: there the Ray tests run in-process.
RAY_CHILD_ENV = "HGRESEARCH_RAY_TEST_CHILD"
RAY_WRAPPER_MODULE = "tests/integration/test_ray_isolated.py"
