"""The test suite. A regular package: gmqtt's wheel installs a top-level ``tests`` package of its own into
site-packages, which would otherwise shadow this directory (a namespace package) on ``import tests.harness``."""
