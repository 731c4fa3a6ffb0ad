"""`et-ode graph train|eval|study`: the graph benchmarks and the studies of a graph
model's dynamics."""

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from ..analysis import (
    CONTRIBUTIONS_OPTIONS,
    CONVERGENCE_OPTIONS,
    FIGURE_FORMATS,
    ConvergenceSettings,
    LongHorizonSettings,
    cast,
    contributions,
    convergence,
    energy_descent,
    graph_overshoot,
    long_horizon,
    plot_contributions,
    plot_convergence,
    plot_energy_descent,
    plot_graph_overshoot,
    plot_long_horizon,
)
from ..core import Conditions
from ..tasks import (
    SHIPPED_GRAPH,
    PaperGraphClassifierET,
    evaluate_graph_model,
    graph_batch,
    load_graph_config,
    load_graph_model,
    load_graph_set,
    load_node_graph,
    run_graph_benchmark,
    run_split,
    standardise,
    table_markdown,
)
from ..vocab import FLOWS
from ._findings import finding
from ._jobs import write_result
from ._runs import job_folder

GRAPH_STUDIES = ("convergence", "energy-descent", "contributions", "long-horizon", "overshoot")


def graph_train(options) -> int:
    config = load_graph_config(options.config)
    summary = run_graph_benchmark(
        config,
        options.out,
        resume=options.resume,
        stop_after=options.stop_after,
        progress=options.progress,
    )
    out = options.out or config.training.out_dir
    if not summary["complete"]:
        print(f"stopped with {len(summary['runs'])} runs done (continue with --resume)")
    print(table_markdown(config, summary["table"]).rstrip())
    print(f"wrote {out}/results.json, results.md, metrics.jsonl and runs/")
    return 0


def graph_eval(options) -> int:
    metrics = evaluate_graph_model(options.checkpoint)
    _, _, header = load_graph_model(options.checkpoint)
    stored = header.get("metrics", {})
    for name, value in metrics.items():
        was = stored.get(name)
        at_training = f"   (at training: {was:.6f})" if was is not None else ""
        print(f"{name:<14} {value:.6f}{at_training}")
    return 0


def _graph_problem(model, config, header, n_graphs: int):
    """`(x0, args, args_batched, extra)` of a graph model's own data: the whole graph for
    an anomaly detector (one state `[N, D]`; `extra` holds the graph, its arrays and
    the run's split), or the first `n_graphs` test graphs of its fold for a classifier
    (a batch `[B, M + 1, D]`)."""
    if config.data.task == "anomaly":
        graph = load_node_graph(config)
        part = run_split(config, graph, header["run"])
        arrays = (
            jnp.asarray(standardise(graph.features)),
            jnp.asarray(graph.senders),
            jnp.asarray(graph.receivers),
        )
        x0 = model.encode(arrays[0])
        args = model.conditions(arrays[1], arrays[2], x0.shape[0])
        return x0, args, False, {"graph": graph, "arrays": arrays, "part": part}
    graphs = load_graph_set(config)
    test = run_split(config, graphs, header["run"])["test"][:n_graphs]
    batch = graph_batch(graphs, test, graphs.max_nodes, config.model.n_eigenvectors)
    x0 = jax.vmap(model.encode)(batch.features, batch.eigenvectors)
    if isinstance(model, PaperGraphClassifierET):  # its A_hat, from these initial tokens
        return x0, model.conditions(x0, batch), True, {"graphs": test}
    return x0, Conditions(key_mask=batch.key_mask), True, {"graphs": test}


def _studied_core(model) -> tuple[Any, dict]:
    """The energy model a graph study follows, and what the metadata says of it: the
    model's core, or the first block of the paper's classifier (its flow from the
    initial tokens, with their `A_hat`; noise off: the studies are of the flow)."""
    if isinstance(model, PaperGraphClassifierET):
        blocks = len(model.blocks)
        return model.blocks[0], {"block": f"1 of {blocks}", "noise": "off"}
    return model.core, {}


def _float64(tree):
    """Every floating array of `tree` in float64 (a study runs in float64)."""
    return jax.tree.map(
        lambda a: a.astype(jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree
    )


def graph_study(options) -> int:
    if options.name not in GRAPH_STUDIES:
        raise ValueError(
            f"unknown graph study {options.name!r}; choose one of {', '.join(GRAPH_STUDIES)}."
        )
    jax.config.update("jax_enable_x64", True)
    model, config, header = load_graph_model(options.checkpoint)
    if options.name == "overshoot" and config.data.task != "anomaly":
        raise ValueError(
            "the graph overshoot study scores nodes: it needs a node anomaly "
            "model (a classifier: use long-horizon)."
        )
    x0, args, batched, extra = _graph_problem(model, config, header, options.graphs)
    with job_folder(options.out, prefix=f"graph-{options.name}", force=options.force) as out:
        files = _graph_study(options, model, x0, args, batched, extra, out)
    figure = files.get(options.format)
    print(f"wrote {files['json']}" + (f" and {figure}" if figure else ""))
    return 0


def _graph_study(options, model, x0, args, batched, extra, out) -> dict:
    """The study of `graph_study` into the folder `out`; returns the files written (the
    figure's caption names the model: `metadata["checkpoint"]`)."""
    quick = options.quick
    flow = options.flow
    result: Mapping[str, Any]  # the study's typed result, or a dict of its keys and more
    if options.name == "overshoot":
        graph, (features, senders, receivers) = extra["graph"], extra["arrays"]
        result = graph_overshoot(
            model,
            features,
            senders,
            receivers,
            graph.labels,
            extra["part"]["test"],
            t_max_factor=options.factor or (10.0 if quick else 100.0),
            n_times=10 if quick else 24,
        )
        said = (
            f"Graph overshoot: test AUC {result['auc_at_horizon']:.4f} at the training "
            f"horizon t = {result['horizon']:g}, {result['auc_at_end']:.4f} at "
            f"t = {result['t_max']:g}; best {result['best_auc']:.4f} at "
            f"t = {result['best_time']:.3g}."
        )
        print(said)
        # a new dict, the finding first: the typed result is read-only
        result = dict(
            finding=said,
            **result,
        )
        result["metadata"] = dict(result["metadata"], checkpoint=str(options.checkpoint))
        files = write_result(out, "overshoot", result, plot_graph_overshoot, options.format)
    else:
        studied, said_of_core = _studied_core(model)
        core = cast(studied, jnp.float64)
        x0 = jnp.asarray(x0, jnp.float64)
        args = _float64(args)
        rtol, atol = (1e-5, 1e-7) if quick else (1e-7, 1e-9)
        plot: Callable[[dict], Figure]  # the study's figure of its result
        if options.name == "convergence":
            result = convergence(
                core,
                x0,
                args,
                flows=(flow,) if flow else FLOWS,
                t1=options.horizon or (20.0 if quick else 1000.0),
                options=CONVERGENCE_OPTIONS.replace(rtol=rtol, atol=atol),
                settings=ConvergenceSettings(
                    n_times=16 if quick else 60,
                    fixed_point_atol={"native": None, "projected": None if quick else 1e-6},
                    chunks=1 if quick else 4,
                    hessian=False,
                ),
                args_batched=batched,
            )
            plot = plot_convergence
        elif options.name == "energy-descent":
            result = energy_descent(
                core,
                x0,
                args,
                (("euler", 0.1), ("euler", 0.5), ("tsit5", rtol, atol)),
                t1=options.horizon or (2.4 if quick else 12.0),
                flow=flow or model.dynamics.flow,
                args_batched=batched,
            )
            plot = plot_energy_descent
        elif options.name == "contributions":
            horizon = options.horizon or (2.4 if quick else 12.0)
            result = contributions(
                core,
                x0,
                args,
                ts=np.linspace(0, horizon, 13),
                options=CONTRIBUTIONS_OPTIONS.replace(flow=flow or model.dynamics.flow),
                args_batched=batched,
            )
            plot = plot_contributions
        else:  # long-horizon: one state
            x_one = x0[0] if batched else x0
            args_one = jax.tree.map(lambda a: a[0], args) if batched else args
            result = long_horizon(
                core,
                x_one,
                args_one,
                flows=(flow,) if flow else FLOWS,
                t1=options.horizon or (20.0 if quick else 1e4),
                settings=LongHorizonSettings(
                    n_times=12 if quick else 41,
                    lyapunov_horizons=(1.0,) if quick else (1.0, 10.0, 100.0),
                    lyapunov_directions=2 if quick else 4,
                ),
            )
            plot = plot_long_horizon
        result["metadata"]["checkpoint"] = str(options.checkpoint)
        result["metadata"].update(said_of_core)
        unit = "graph" if batched or "graphs" in extra else "graph (all its nodes)"
        result = {"finding": finding(options.name, result, unit=unit), **result}
        print(result["finding"])
        files = write_result(out, options.name, result, plot, options.format)
    return files


def add_graph_commands(commands, positive_int, positive_float) -> None:
    """`et-ode graph ...` on the command parser `commands` (argparse sub-parsers)."""
    graph = commands.add_parser(
        "graph",
        help="graphs: node anomaly detection and graph classification benchmarks "
        "(train, eval) and studies of a graph model's dynamics",
    )
    actions = graph.add_subparsers(dest="graph_command", metavar="ACTION", required=True)

    train = actions.add_parser(
        "train",
        help="every model of a TOML config on every split or fold: the results "
        "table (mean +- std), one checkpoint per run",
    )
    train.add_argument(
        "--config",
        required=True,
        help="TOML config (configs/graph_anomaly.toml, configs/graph_csl.toml)",
    )
    train.add_argument("--out", default=None, help="benchmark folder (default: [training] out_dir)")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the benchmark in --out: finished runs are kept",
    )
    train.add_argument(
        "--stop-after",
        type=positive_int,
        default=None,
        help="end after this many new runs (resume later)",
    )
    train.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar"
    )
    train.set_defaults(handler=graph_train)

    evaluate = actions.add_parser("eval", help="re-evaluate a graph model on its own split or fold")
    evaluate.add_argument(
        "--checkpoint",
        default="graph_anomaly",
        help="a run's checkpoint (OUT/runs/NAME.eqx) or a shipped graph "
        f"model ({', '.join(SHIPPED_GRAPH)}; the default)",
    )
    evaluate.set_defaults(handler=graph_eval)

    study = actions.add_parser(
        "study", help="one study of a graph model's dynamics: " + ", ".join(GRAPH_STUDIES)
    )
    study.add_argument("name", metavar="NAME", help="one of " + ", ".join(GRAPH_STUDIES))
    study.add_argument(
        "--checkpoint",
        default="graph_anomaly",
        help="a run's checkpoint or a shipped graph model (default graph_anomaly)",
    )
    study.add_argument(
        "--graphs",
        type=positive_int,
        default=4,
        help="classification models: test graphs of the model's fold (default 4)",
    )
    study.add_argument(
        "--flow",
        choices=FLOWS,
        default=None,
        help="default: both for convergence and long-horizon, else the model's",
    )
    study.add_argument(
        "--horizon",
        type=positive_float,
        default=None,
        help="end time in tau (default per study; shorter with --quick)",
    )
    study.add_argument(
        "--factor",
        type=positive_float,
        default=None,
        help="overshoot: the end as a multiple of the training horizon "
        "(default 100, 10 with --quick)",
    )
    study.add_argument("--quick", action="store_true", help="short horizons, small grids")
    study.add_argument(
        "--out",
        default=None,
        help="output folder (default: a fresh runs/graph-NAME-YYYYmmdd-HHMMSS)",
    )
    study.add_argument("--force", action="store_true", help="write into a non-empty --out")
    study.add_argument(
        "--format",
        choices=FIGURE_FORMATS,
        default="png",
        help="the figure as png (default), or as vector graphics: pdf, svg",
    )
    study.set_defaults(handler=graph_study)
