"""`python -m lab.bench.render`: the cost of drawing a run live, on a 50-station graph.

Measures, for a graph of `--stations` stations (default 50: a chain with side branches and
loops back, so edges cross and `dot` has real work):

- first layout: `dot` laying the graph out (the layout cache cleared before each sample);
- restyle + push: one step's update of a `GraphView` — build the step's overlay from the path
  so far, restyle the cached SVG template, set the widget's `value` (ipywidgets serialises the
  state message, and the comm packs it as JSON the way the kernel's session does). The
  browser's paint and the socket write are not included;
- for context, `RunWidget.refresh()` after a step of a real run of the same graph (store reads,
  state tree, diff, events and the graph);
- a parallel run (`--width`, default 16): a map of `width` squares and a join, in a loop, on
  the super-step engine. Restyle + push of one super-step (the frontier overlay built from the
  branch's checkpoints, every task lit) and `RunWidget.refresh()` after each step.

Target: restyle + push median under 5 ms. Prints a Markdown table; always exits 0.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass, make_dataclass
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext, StepContext
from pydantic_graph.join import reduce_list_append

from .. import Lab
from ..render import clear_layout_cache, layout, overlay_from_path, spec_for

__all__ = ("main", "measure", "declare_stations")

TARGET_MS = 5.0


@dataclass
class Walk:
    step: int = 0
    limit: int = 400


def _successors(i: int, n: int) -> list[int]:
    """Station i goes on to i+1, and some stations branch ahead or loop back."""
    out = [i + 1] if i + 1 < n else [0]
    if i % 5 == 2 and i + 3 < n:
        out.append(i + 3)
    if i % 7 == 6:
        out.append(max(0, i - 6))
    return out


def declare_stations(lab: Lab, n: int = 50) -> Any:
    """A graph of `n` stations S0..S{n-1} (the last loops to S0); the walk ends after `limit` visits."""
    g = lab.graph(f"bench{n}", state_type=Walk, output_type=int)
    classes: dict[str, type] = {}
    for i in range(n):
        succ = _successors(i, n)
        hint = " | ".join([f"S{j}" for j in succ] + ["End[int]"])

        def make_run(succ: list[int] = succ, hint: str = hint) -> Any:
            async def run(self: Any, ctx: GraphRunContext[Walk, None]) -> Any:
                ctx.state.step += 1
                if ctx.state.step >= ctx.state.limit:
                    return End(ctx.state.step)
                return classes[f"S{succ[ctx.state.step % len(succ)]}"]()

            run.__annotations__ = {"return": hint}
            return run

        cls = make_dataclass(f"S{i}", [], bases=(BaseNode[Walk, None, int],), namespace={"run": make_run()})
        classes[cls.__name__] = cls
        g.node(cls)
    return g, classes


class _PackingComm:
    """A comm that serialises every message as the kernel's session does, then drops it.

    Outside a kernel ipywidgets uses a no-op comm; this one adds the JSON packing a kernel does
    (`jupyter_client.session.json_packer`) so the measured push includes it. The socket write
    and the browser are still not measured.
    """

    def __init__(self) -> None:
        import comm.base_comm
        from jupyter_client.session import json_packer

        class Packing(comm.base_comm.BaseComm):
            packed = 0

            def publish_msg(
                self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
            ) -> None:
                content = {"data": data or {}, "comm_id": self.comm_id, **keys}
                Packing.packed += len(json_packer(content)) + len(json_packer(metadata or {}))

        self.cls = Packing

    def __enter__(self) -> _PackingComm:
        import comm

        self._saved = comm.create_comm
        comm.create_comm = lambda *a, **k: self.cls(*a, **k)
        return self

    def __exit__(self, *exc: object) -> None:
        import comm

        comm.create_comm = self._saved


def _quantiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "median": statistics.median(ms),
        "p90": ms[int(0.9 * (len(ms) - 1))],
        "min": ms[0],
        "n": float(len(ms)),
    }


def measure(stations: int = 50, steps: int = 300, layouts: int = 7) -> dict[str, dict[str, float]]:
    """Time the three measures; milliseconds."""
    from ..widgets import GraphView, RunWidget

    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, _PackingComm() as packing:
        lab = Lab(f"{tmp}/lab.duckdb")
        try:
            g, classes = declare_stations(lab, stations)
            spec = spec_for(g)
            times = []
            for _ in range(layouts):
                clear_layout_cache()
                t = time.perf_counter()
                layout(spec)
                times.append((time.perf_counter() - t) * 1000)
            out["first layout (dot)"] = _quantiles(times)

            view = GraphView(spec=spec)
            ids = list(spec.station_ids)
            path: list[str] = []
            times = []
            for k in range(steps):
                path.append(ids[(k * 7) % len(ids)])
                nxt = ids[(k * 7 + 7) % len(ids)]
                t = time.perf_counter()
                view.show(overlay_from_path(path, [nxt]))
                times.append((time.perf_counter() - t) * 1000)
            out["restyle + push one step (GraphView)"] = _quantiles(times)
            out["svg size (kB)"] = {"median": len(view.value) / 1000, "p90": 0, "min": 0, "n": 1}
            assert packing.cls.packed > steps * len(view.value) * 0.9, "the pushes were not packed"

            run = g.start(classes["S0"](), state=Walk(limit=10_000))
            w = RunWidget(run)
            times = []
            for _ in range(min(steps, 200)):
                run.step()
                t = time.perf_counter()
                w.refresh()
                times.append((time.perf_counter() - t) * 1000)
            out["RunWidget.refresh() after a step (context)"] = _quantiles(times)
            w.close()
            view.close()
        finally:
            lab.close()
    return out


@dataclass
class Rounds:
    done: int = 0
    limit: int = 40


def declare_map_loop(lab: Lab, width: int) -> Any:
    """`width` numbers mapped over `square` and joined, round after round until `limit` rounds."""
    g = lab.graph(f"bench_map{width}", state_type=Rounds, input_type=list[int], output_type=int)

    async def square(ctx: StepContext[Rounds, None, int]) -> int:
        return ctx.inputs * ctx.inputs

    async def again(ctx: StepContext[Rounds, None, list[int]]) -> list[int] | int:
        ctx.state.done += 1
        return sum(ctx.inputs) if ctx.state.done > ctx.state.limit else list(range(width))

    sq, ag = g.step(square), g.step(again)
    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(ag),
        g.edge_from(ag).to(g.decision().branch(g.match(list).map().to(sq)).branch(g.match(int).to(g.end_node))),
        g.edge_from(sq).to(collect),
        g.edge_from(collect).to(ag),
    )
    return g


def measure_parallel(width: int = 16, steps: int = 60) -> dict[str, dict[str, float]]:
    """A map of `width` in a loop on the super-step engine: restyle + push and refresh per step; ms."""
    from ..widgets import RunWidget

    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, _PackingComm():
        lab = Lab(f"{tmp}/lab.duckdb")
        try:
            g = declare_map_loop(lab, width)
            run = g.start(inputs=list(range(width)), state=Rounds(limit=steps))
            w = RunWidget(run)
            # the timeline scrubs by super-step only when the run is drawn as whole frontiers
            assert w.slider.description == "step", "the map loop should run on the super-step engine"
            refresh, restyle = [], []
            lit = 0
            while run.status != "done" and len(refresh) < steps:
                run.step()
                t = time.perf_counter()
                w.refresh()
                refresh.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ov = w.overlay_at(w.slider.max)  # the head's super-step, every task of its frontier lit
                w.graph.show(ov)
                restyle.append((time.perf_counter() - t) * 1000)
                lit = max(lit, ov.tasks.get("square", 0))
            assert lit == width, f"a step should light {width} square tasks, saw {lit}"
            out[f"restyle + push one super-step (map of {width})"] = _quantiles(restyle)
            out[f"RunWidget.refresh() after a super-step (map of {width}, context)"] = _quantiles(refresh)
            w.close()
        finally:
            lab.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.render", description=__doc__.splitlines()[0])
    ap.add_argument("--stations", type=int, default=50)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--layouts", type=int, default=7)
    ap.add_argument("--width", type=int, default=16, help="tasks of the parallel run's map")
    args = ap.parse_args(argv)
    res = measure(args.stations, args.steps, args.layouts)
    res.update(measure_parallel(args.width, min(args.steps, 60)))
    print(f"{args.stations} stations; {platform.platform()}; CPython {platform.python_version()}\n")
    print("| measure | median | p90 | min | samples | target | met |")
    print("|---|---:|---:|---:|---:|---:|:---:|")
    for name, q in res.items():
        unit = "" if "kB" in name else " ms"
        target, met = "", ""
        if name.startswith("restyle"):  # one step, serial or super-step
            target, met = f"< {TARGET_MS:g} ms", "yes" if q["median"] < TARGET_MS else "**no**"
        if "kB" in name:
            print(f"| {name} | {q['median']:.1f} | | | | | |")
            continue
        print(
            f"| {name} | {q['median']:.2f}{unit} | {q['p90']:.2f}{unit} | {q['min']:.2f}{unit} | {int(q['n'])} | {target} | {met} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
