"""Human-readable sweep output: tables and the Pareto front plot (the live table is `orchestrate.tuner.live_table`)."""

from __future__ import annotations

from raydistill.common.units import size  # noqa: F401  (re-exported: the summary and the sweep read it here)

SHOW = ("method", "student_layers", "student_hidden", "temperature", "alpha", "beta", "mapping")
# every param a space can search (Tune config keys = MLflow param names); the UI view shows those that varied
PARAMS = (
    "student_size",
    "student_layers",
    "student_hidden",
    "student_intermediate",
    "student_heads",
    "init",
    "temperature",
    "alpha",
    "beta",
    "mapping",
    "alpha_cos",
    "alpha_mlm",
    "version",
    "relation_heads",
    "teacher_layer",
    "lr",
    "batch_size",
    "warmup_ratio",
    "weight_decay",
)


def disk_size(n: float) -> str:
    """Bytes as a person reads them: ``1.8 GB``, ``270 MB``, ``4.0 KB`` (powers of 1000, as ``du --si``)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            x = n / scale
            return f"{x:.1f} {unit}" if abs(x) < 100 else f"{x:.0f} {unit}"
    return f"{n:g} B"


def fmt(v, column: str = "") -> str:
    """A table cell: a parameter count (a ``*_params`` column) as ``17.4M``, other floats to 4 significant digits."""
    if column.endswith("_params") and isinstance(v, int | float) and not isinstance(v, bool):
        return size(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def table(rows: list[dict], columns: list[str]) -> str:
    cells = [[fmt(r.get(c), c) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]

    def line(vals):
        return "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True))

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells])


def pareto_front(points: list[tuple[float, float]], maximize_y: bool = True) -> list[int]:
    """Indices of points not dominated in (smaller x, better y)."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any(
            (x2 <= x and (y2 >= y if maximize_y else y2 <= y)) and (x2, y2) != (x, y)
            for j, (x2, y2) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def pareto_plot(
    rows: list[dict], metric: str, path: str, maximize: bool = True, teacher: dict | None = None, keep: float = 0.97
) -> str | None:
    """``metric`` (a sweep passes the validation score that chose, as its table's front does) vs parameters and vs
    batch-1 latency, Pareto-optimal trials highlighted; with ``teacher`` (its ``metric``, ``student_params`` and
    ``latency_ms_b1``) the teacher's point, its score and ``keep`` × its score are drawn too, so a student's standing
    needs no arithmetic. Returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get(metric) is not None and r.get("student_params")]
    if not rows:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, xkey, xlabel in (
        (axes[0], "student_params", "parameters (M)"),
        (axes[1], "latency_ms_b1", "batch-1 latency (ms, CPU)"),
    ):
        pts = [(r.get(xkey) or 0.0, r[metric]) for r in rows]
        scale = 1e6 if xkey == "student_params" else 1.0
        front = set(pareto_front(pts, maximize))
        xs, ys = [p[0] / scale for p in pts], [p[1] for p in pts]
        ax.scatter(xs, ys, c=["tab:red" if i in front else "tab:gray" for i in range(len(pts))], zorder=3)
        fr = sorted((xs[i], ys[i]) for i in front)
        ax.plot([p[0] for p in fr], [p[1] for p in fr], "r--", lw=1, zorder=2)
        for r, x, y in zip(rows, xs, ys, strict=True):
            ax.annotate(str(r.get("trial", "")), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        t_score = teacher.get(metric) if teacher else None
        if teacher is not None and t_score is not None:  # a score implies a teacher
            ax.axhline(t_score, color="tab:blue", lw=1, label=f"teacher {t_score:.4g}")
            ax.axhline(keep * t_score, color="tab:blue", ls=":", lw=1, label=f"{keep:.0%} of teacher")
            if teacher.get(xkey):
                ax.scatter([teacher[xkey] / scale], [t_score], marker="*", s=140, color="tab:blue", zorder=4)
                ax.annotate(
                    "teacher", (teacher[xkey] / scale, t_score), fontsize=8, xytext=(4, -10), textcoords="offset points"
                )
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{metric} vs size and latency (red: Pareto front)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
