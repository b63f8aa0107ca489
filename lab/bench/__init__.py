"""Benchmarks: what the lab costs, measured against raw pydantic-graph. Not imported by the lab.

- `python -m lab.bench` (`cli.py`): the loop table (`serial.py`), the 16-wide map + join
  (`parallel.py`), a reader in a second process (`readers.py`); `--ray` adds a batch on Ray
  (`batch.py`), `--profile` profiles the lab step variant instead (`profile.py`);
- `python -m lab.bench.history`: time travel on a run of 100,000 checkpoints;
- `python -m lab.bench.render`: drawing a run live;
- `python -m lab.bench.agents`: a delegated agent station against the agent alone;
- `python -m lab.bench.subroutine`: a subroutine against raw pydantic-graph.

Arrows point one way: `cli` imports the measuring modules, the measuring modules import
`common` (the loop graph they share) and the lab's public API, and nothing in `lab` imports
this package (`pyproject.toml`'s import-linter contracts). docs/benchmarks.md has the numbers.
"""
