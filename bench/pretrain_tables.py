"""The markdown tables `bench.bench_pretrain` writes into its JSON, one per stage, from its per-graph results."""

from __future__ import annotations

import math

import numpy as np


def rl_heavy_edge_table(results: dict, k: str) -> str:
    lines = ["| graph | RL 90 s (stage rl) | RL 90 s, heavy-edge groups | stage rl vs it | RL 600 s | "
             "RL 600 s, heavy-edge groups | RL 600 s vs it | zero-shot best-of-K | vs RL 600 s | "
             "vs heavy-edge RL 600 s |", "|---|---|---|---|---|---|---|---|---|---|"]
    ms = lambda x: f"{x * 1e3:.1f} ms" if x else "-"  # noqa: E731
    rel = lambda a, b: f"{a / b - 1:+.1%}" if a and b else "-"  # noqa: E731
    for name, r in results["graphs"].items():
        e, rl, z = r.get("rl_heavy_edge"), r.get("rl"), (r.get("zero_shot") or {}).get(k)
        if not (e and rl and z):
            continue
        a, b = r.get("rl_600"), r.get("rl_600_heavy_edge")
        lines.append(f"| {name} | {ms(rl['step_time'])} | {ms(e['step_time'])} | {rel(rl['step_time'], e['step_time'])} | "
                     f"{ms(a)} | {ms(b)} | {rel(a, b)} | {ms(z['step_time'])} | {rel(z['step_time'], a)} | "
                     f"{rel(z['step_time'], b)} |")
    return "\n".join(lines)


def rl_searched_table(results: dict) -> str:
    lines = ["| graph | best heuristic | RL 90 s from it (stage rl) | + search: warm start | RL 90 s from that | "
             "change | RL 600 s | vs RL 600 s |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results["graphs"].items():
        s, rl, rl600 = r.get("rl_searched"), r.get("rl"), r.get("rl_600")
        if not (s and rl and rl600):
            continue
        ms = lambda x: f"{x * 1e3:.1f} ms"  # noqa: E731
        lines.append(f"| {name} | {ms(s['heuristic_step_time'])} ({r['heuristics']['best']}) | {ms(rl['step_time'])} | "
                     f"{ms(s['start_step_time'])} | {ms(s['step_time'])} | {s['step_time'] / rl['step_time'] - 1:+.1%} | "
                     f"{ms(rl600)} | {s['step_time'] / rl600 - 1:+.1%} |")
    return "\n".join(lines)


def finetune_600_steps(f: dict) -> tuple[int, int | None, bool]:
    """Stage finetune_600's ``(the 10-minute run's steps to its result, the fine-tune's or None when it did
    not get there, whether that is within a fifth)``, imitation steps included in both counts."""
    scratch = f["rl_600_found_at_step"] + f["rl_600_imitation_steps"]
    ours = None if f["steps_to_match"] is None else f["steps_to_match"] + f["imitation_steps"]
    return scratch, ours, ours is not None and ours <= scratch / 5


def finetune_600_table(results: dict) -> str:
    lines = ["| graph | zero-shot start | RL 600 s | its steps to it (incl. imitation) | fine-tune steps to it "
             "(incl. imitation) | within a fifth |", "|---|---|---|---|---|---|"]
    for name, r in results["graphs"].items():
        f = r.get("finetune_600")
        if not f:
            continue
        scratch, ours, within = finetune_600_steps(f)
        lines.append(f"| {name} | {f['start_step_time'] * 1e3:.1f} ms | {f['target'] * 1e3:.1f} ms | {scratch} | "
                     + (f"not within {f['steps_run'] + f['imitation_steps']} ({f['best_step_time'] * 1e3:.1f} ms, "
                        f"{f['seconds']:.0f} s)" if ours is None else str(ours))
                     + f" | {'yes' if within else 'no'} |")
    return "\n".join(lines)


def refine_table(results: dict) -> str:
    lines = ["| graph | zero-shot | + refine | best heuristic | + refine | RL 600 s | refined zero-shot vs RL 600 s | "
             "refined heuristic vs RL 600 s | refined zero-shot vs refined heuristic | per-graph RL (stage refine_rl) | "
             "+ refine | refined RL vs RL 600 s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results["graphs"].items():
        f, rl = r.get("refine"), r.get("rl_600")
        if not (f and rl):
            continue
        z, h = f["zero_shot"], f["heuristic"]
        ms = lambda x: f"{x * 1e3:.1f} ms"  # noqa: E731
        lines.append(f"| {name} | {ms(z['start_step_time'])} | {ms(z['step_time'])} ({z['moves']} moves) | "
                     f"{ms(h['start_step_time'])} ({r['heuristics']['best']}) | {ms(h['step_time'])} ({h['moves']} moves) | "
                     f"{ms(rl)} | {z['step_time'] / rl - 1:+.1%} | {h['step_time'] / rl - 1:+.1%} | "
                     f"{z['step_time'] / h['step_time'] - 1:+.1%} | " + _refine_rl_cells(r.get("refine_rl"), rl))
    return "\n".join(lines)


def _refine_rl_cells(f: dict | None, rl600: float) -> str:
    if not f:
        return "- | - | - |"
    return (f"{f['start_step_time'] * 1e3:.1f} ms ({f['rl_budget_seconds']:g} s) | {f['step_time'] * 1e3:.1f} ms "
            f"({f['moves']} moves) | {f['step_time'] / rl600 - 1:+.1%} |")


def _finetune_cell(ft: dict | None) -> str:
    if not ft:
        return "-"
    imitation = f" (+{ft['imitation_steps']} imitation)" if ft.get("imitation_steps") else ""
    if ft["steps_to_match"] is None:
        return f"not within {ft['steps_run']} steps{imitation}"
    return f"{ft['steps_to_match']}{imitation}"


def table(results: dict) -> str:
    lines = ["| graph | set | ops | best heuristic | per-graph RL | zero-shot greedy | zero-shot best-of-K | "
             "greedy vs RL | best-of-K vs RL | best-of-K vs heuristic | best-of-K place s | RL steps to R | fine-tune steps to R | "
             "fine-tune + heuristic steps to R | RL 600 s (bench_rl) | best-of-K vs RL 600 s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results["graphs"].items():
        h, rl, z, ft = r.get("heuristics"), r.get("rl"), r.get("zero_shot"), r.get("finetune")
        if not (h and rl and z):
            continue
        k = [key for key in z if key.startswith("best_of")][0]
        ms = lambda x: f"{x * 1e3:.1f} ms"  # noqa: E731
        ft_cell, fth_cell = _finetune_cell(ft), _finetune_cell(r.get("finetune_heuristic"))
        lines.append(
            f"| {name} | {r['set']} | {r['ops']} | {ms(h['best_step_time'])} ({h['best']}) | {ms(rl['step_time'])} | "
            f"{ms(z['greedy']['step_time'])}{' OOM' if z['greedy']['oom'] else ''} | "
            f"{ms(z[k]['step_time'])}{' OOM' if z[k]['oom'] else ''} | "
            f"{z['greedy']['step_time'] / rl['step_time'] - 1:+.1%} | {z[k]['step_time'] / rl['step_time'] - 1:+.1%} | "
            f"{z[k]['step_time'] / h['best_step_time'] - 1:+.1%} | {z[k]['seconds']:.2f} | "
            f"{rl['found_at_step']} (+{rl['imitation_steps']} imitation) | "
            f"{ft_cell} | {fth_cell} | " + (f"{ms(r['rl_600'])} | {z[k]['step_time'] / r['rl_600'] - 1:+.1%} |"
                               if r.get("rl_600") else "- | - |"))
    return "\n".join(lines)


def _geo(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else math.nan


def add_tables(results: dict, best_of: int) -> None:
    """Put each stage's table and summary into `results` (the stages that have run on some graph)."""
    results["table"] = table(results)
    done = [r for r in results["graphs"].values() if {"heuristics", "rl", "zero_shot"} <= set(r)]
    if done:
        k = f"best_of_{best_of}"
        results["summary"] = {
            "graphs": len(done),
            "geomean_greedy_over_rl": _geo([r["zero_shot"]["greedy"]["step_time"] / r["rl"]["step_time"] for r in done]),
            "geomean_best_of_k_over_rl": _geo([r["zero_shot"][k]["step_time"] / r["rl"]["step_time"]
                                               for r in done if k in r["zero_shot"]]),
            "geomean_best_of_k_over_heuristic": _geo([r["zero_shot"][k]["step_time"] / r["heuristics"]["best_step_time"]
                                                      for r in done if k in r["zero_shot"]]),
            "geomean_best_of_k_over_rl_600s": _geo([r["zero_shot"][k]["step_time"] / r["rl_600"]
                                                    for r in done if k in r["zero_shot"] and r.get("rl_600")]),
            "best_of_k_within_5pct_of_rl_600s": sum(r["zero_shot"][k]["step_time"] <= 1.05 * r["rl_600"]
                                                    for r in done if k in r["zero_shot"] and r.get("rl_600")),
            "best_of_k_no_worse_than_heuristic": sum(r["zero_shot"][k]["step_time"] <= r["heuristics"]["best_step_time"]
                                                     for r in done if k in r["zero_shot"]),
            "geomean_best_of_k_over_heavy_edge_rl_600s": _geo([r["zero_shot"][k]["step_time"] / r["rl_600_heavy_edge"]
                                                               for r in done if k in r["zero_shot"]
                                                               and r.get("rl_600_heavy_edge")]),
        }
        results["summary"] = {key: v for key, v in results["summary"].items()  # no NaN (not JSON) where a
                              if not (isinstance(v, float) and math.isnan(v))}  # reference never ran
    tuned = [r["finetune_600"] for r in results["graphs"].values() if r.get("finetune_600")]
    if tuned:
        results["finetune_600_table"] = finetune_600_table(results)
        counts = [finetune_600_steps(f) for f in tuned]
        results["finetune_600_summary"] = {
            "graphs": len(tuned), "reached": sum(ours is not None for _, ours, _ in counts),
            "within_a_fifth_of_the_steps": sum(within for _, _, within in counts),
        }
    refined = [r for r in results["graphs"].values() if r.get("refine") and r.get("rl_600")]
    if refined:
        results["refine_table"] = refine_table(results)
        z = [r["refine"]["zero_shot"]["step_time"] for r in refined]
        h = [r["refine"]["heuristic"]["step_time"] for r in refined]
        rl = [r["rl_600"] for r in refined]
        results["refine_summary"] = {
            "graphs": len(refined), "seconds": refined[0]["refine"]["seconds"],
            "geomean_refined_zero_shot_over_rl_600s": _geo([a / b for a, b in zip(z, rl)]),
            "geomean_refined_heuristic_over_rl_600s": _geo([a / b for a, b in zip(h, rl)]),
            "geomean_refined_zero_shot_over_refined_heuristic": _geo([a / b for a, b in zip(z, h)]),
            "refined_zero_shot_within_5pct_of_rl_600s": sum(a <= 1.05 * b for a, b in zip(z, rl)),
            "refined_zero_shot_no_worse_than_refined_heuristic": sum(a <= b for a, b in zip(z, h)),
        }
        with_rl = [r for r in refined if r.get("refine_rl")]
        if with_rl:
            results["refine_summary"].update({
                "graphs_with_refined_rl": len(with_rl),
                "geomean_rl_over_rl_600s": _geo([r["refine_rl"]["start_step_time"] / r["rl_600"] for r in with_rl]),
                "geomean_refined_rl_over_rl_600s": _geo([r["refine_rl"]["step_time"] / r["rl_600"] for r in with_rl]),
            })
    k = f"best_of_{best_of}"
    heavy = [r for r in results["graphs"].values()
             if r.get("rl_heavy_edge") and r.get("rl") and k in (r.get("zero_shot") or {})]
    results.pop("rl_grouped_table", None)
    results.pop("rl_grouped_summary", None)
    if heavy:
        results["rl_heavy_edge_table"] = rl_heavy_edge_table(results, k)
        ten = [r for r in heavy if r.get("rl_600") and r.get("rl_600_heavy_edge")]
        results["rl_heavy_edge_summary"] = {
            "graphs": len(heavy),
            "geomean_rl_over_heavy_edge_rl": _geo([r["rl"]["step_time"] / r["rl_heavy_edge"]["step_time"]
                                                   for r in heavy]),
            "graphs_with_both_600s": len(ten),
            "geomean_rl_600s_over_heavy_edge_rl_600s": _geo([r["rl_600"] / r["rl_600_heavy_edge"] for r in ten]),
            "rl_600s_faster": sum(r["rl_600"] < r["rl_600_heavy_edge"] for r in ten),
        }
    searched = [r for r in results["graphs"].values() if r.get("rl_searched") and r.get("rl") and r.get("rl_600")]
    if searched:
        results["rl_searched_table"] = rl_searched_table(results)
        results["rl_searched_summary"] = {
            "graphs": len(searched), "search_seconds": searched[0]["rl_searched"]["search_seconds"],
            "geomean_searched_over_rl": _geo([r["rl_searched"]["step_time"] / r["rl"]["step_time"] for r in searched]),
            "geomean_searched_over_rl_600s": _geo([r["rl_searched"]["step_time"] / r["rl_600"] for r in searched]),
            "geomean_rl_over_rl_600s": _geo([r["rl"]["step_time"] / r["rl_600"] for r in searched]),
            "faster_than_rl": sum(r["rl_searched"]["step_time"] < r["rl"]["step_time"] for r in searched),
        }
