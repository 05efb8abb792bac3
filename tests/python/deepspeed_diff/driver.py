"""Run the DeepSpeed differential matrix and print the table.

    python driver.py [--configs a,b,...] [--out-dir DIR] [--jobs N] [--reuse-deepspeed]

Each (config, side) pair runs `run_side.py` in its own process with
DS_ACCELERATOR=cpu, a one-rank gloo group on a free port and OMP_NUM_THREADS=1
(so both sides sum in the same thread layout and the run does not depend on the
machine's core count). Exit status: 0 when every config that DeepSpeed can run
agrees within its tolerance, 1 otherwise. A config DeepSpeed cannot run on CPU
is listed with DeepSpeed's own error, never dropped.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import TOLERANCES, compare  # noqa: E402
from configs import CONFIGS  # noqa: E402

SIDES = ("deepspeed", "deepspeed_c")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def remove_shm_buffers(port: int) -> int:
    """DeepSpeed's CPU shm collective (deepspeed/ops/csrc/cpu/comm/shm.cpp) creates
    /dev/shm/deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank> (~67 MB) per
    process and never unlinks it. A few hundred runs filled a 24 GiB tmpfs (RAM)
    and the machine thrashed until CI ran out of time, so each side's buffers are
    removed as soon as its process ends (the port is unique to the process)."""
    removed = 0
    for f in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_{port}_*"):
        try:
            os.unlink(f)
            removed += 1
        except OSError:
            pass
    return removed


def run_side(side: str, name: str, out_dir: str, timeout: float, deadline: float = float("inf")) -> dict:
    """One side of one config in its own process. `deadline` (time.monotonic())
    is the matrix's time budget: a side that would start after it is not run,
    and one the budget cuts short is reported as not run rather than failed."""
    left = deadline - time.monotonic()
    if left <= 1.0:
        return {"steps": [], "not_run": "the time budget was spent before it started"}
    cut_by_budget = left < timeout
    timeout = min(timeout, left)
    path = os.path.join(out_dir, f"{name}.{side}.json")
    log = os.path.join(out_dir, f"{name}.{side}.log")
    port = _free_port()
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_SIZE="1")
    cmd = [sys.executable, os.path.join(HERE, "run_side.py"), "--side", side, "--config", name, "--out", path]
    start = time.perf_counter()
    try:
        with open(log, "w") as fh:
            proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
        if cut_by_budget:
            remove_shm_buffers(port)
            return {"steps": [], "not_run": f"stopped after {timeout:.0f} s when the time budget ran out",
                    "wall_seconds": time.perf_counter() - start, "log": log}
    finally:
        remove_shm_buffers(port)
    seconds = time.perf_counter() - start
    if os.path.exists(path) and os.path.getmtime(path) >= time.time() - seconds - 1:
        with open(path) as fh:
            result = json.load(fh)
    else:
        tail = open(log).read().strip().splitlines()[-3:] if os.path.exists(log) else []
        result = {"steps": [], "error": {"phase": "process", "type": f"exit {rc}",
                                         "message": " | ".join(tail)[-600:]}}
    result["wall_seconds"] = seconds
    result["log"] = log
    return result


# DeepSpeed's refusals on the CPU accelerator that mean "this config cannot run
# there" (docs/PYTHON.md, "What DeepSpeed cannot run on CPU").
DS_CPU_LIMITS = ("This op had not been implemented on CPU backend",)


def _err(result: dict) -> str:
    e = result["error"]
    return f"{e['type']}: {e['message']} (at {e['phase']})"


def row(name: str, ds: dict, ours: dict) -> dict:
    entry = CONFIGS[name]
    r = {"config": name, "note": entry["note"], "tol": entry["tol"], "ds_engine": ds.get("engine"),
         "ours_engine": ours.get("engine"), "ds_seconds": ds.get("wall_seconds"),
         "ours_seconds": ours.get("wall_seconds")}
    if "not_run" in ds or "not_run" in ours:
        # Not a failure: the run's time budget (--budget-s) ended first.
        r["verdict"] = "NOT-RUN"
        r["detail"] = "; ".join(f"{side}: {res['not_run']}" for side, res in
                                (("DeepSpeed", ds), ("deepspeed_c", ours)) if "not_run" in res)
        return r
    if "error" in ds:
        # Only DeepSpeed's own "no CPU op" refusal is a config it cannot run;
        # any other failure (a missing build tool, a broken venv) means the
        # comparison did not happen, and that fails the run.
        known = any(p in ds["error"]["message"] for p in DS_CPU_LIMITS)
        r["verdict"] = "DS-CANNOT-RUN" if known else "FAIL"
        r["detail"] = "DeepSpeed: " + _err(ds)
        if "error" in ours:
            r["detail"] += "; deepspeed_c: " + _err(ours)
        else:
            r["detail"] += f"; deepspeed_c ran {len(ours['steps'])} steps"
        return r
    if "error" in ours:
        r["verdict"] = "FAIL"
        r["detail"] = "deepspeed_c: " + _err(ours)
        return r
    r.update(compare(ours, ds, entry["tol"], ds_norm_new_scale=entry["ds_norm_new_scale"]))
    r["verdict"] = "PASS" if r["ok"] else ("DIFFERS-BY-DESIGN" if entry["known_diff"] else "FAIL")
    r["detail"] = "; ".join(r["problems"])
    if entry["known_diff"] and not r["ok"]:
        r["detail"] = "by design: " + entry["known_diff"] + " | " + r["detail"]
    return r


def print_table(rows: list, out=sys.stdout) -> None:
    head = f"{'config':<36} {'steps':>5} {'max|dparam| rel':>15} {'max|dparam|':>11} {'max dlr':>9} " \
           f"{'dnorm rel':>9} {'scale=':>6} {'skip=':>5}  verdict"
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        if "param_rel" in r:
            print(f"{r['config']:<36} {r['steps']:>5} {r['param_rel']:>15.2e} {r['param_abs']:>11.2e} "
                  f"{r['lr_abs']:>9.1e} {r['norm_rel']:>9.1e} {('yes' if r['scale_equal'] else 'NO'):>6} "
                  f"{('yes' if r['skip_equal'] else 'NO'):>5}  {r['verdict']} ({r['tol']})", file=out)
        else:
            print(f"{r['config']:<36} {'-':>5} {'-':>15} {'-':>11} {'-':>9} {'-':>9} {'-':>6} {'-':>5}  "
                  f"{r['verdict']}", file=out)
    print("", file=out)
    for r in rows:
        extra = [r["note"]] if r["note"] else []
        if r.get("detail"):
            extra.append(r["detail"])
        if r.get("norm_source") == "computed":
            extra.append("grad norm: DeepSpeed reports None on this path, compared with the norm of p.grad")
        if extra:
            print(f"  {r['config']}: " + " | ".join(extra), file=out)
    print("\ntolerances (max over 30 steps): " + "; ".join(
        f"{k}: param rel {v['param_rel']:g}, lr rel {v['lr_rel']:g}, grad-norm rel {v['norm_rel']:g}"
        for k, v in TOLERANCES.items()) + "; loss scale, skipped and global steps exact", file=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="", help="comma-separated names (default: all)")
    parser.add_argument("--out-dir", default=os.path.join(os.getcwd(), "build", "deepspeed_diff"))
    parser.add_argument("--jobs", type=int, default=1, help="side processes run at once")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per side process")
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="time budget for the whole matrix in seconds (0: none); sides that would "
                             "start after it are listed as NOT-RUN, not failed")
    parser.add_argument("--reuse-deepspeed", action="store_true",
                        help="reuse DeepSpeed's records from an earlier run in --out-dir")
    parser.add_argument("--list", action="store_true", help="print the config names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CONFIGS))
        return 0
    names = [n for n in args.configs.split(",") if n] or list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {unknown}; known: {', '.join(CONFIGS)}")
    os.makedirs(args.out_dir, exist_ok=True)
    start = time.perf_counter()
    jobs = []
    for name in names:
        for side in SIDES:
            cached = os.path.join(args.out_dir, f"{name}.{side}.json")
            if side == "deepspeed" and args.reuse_deepspeed and os.path.exists(cached):
                continue
            jobs.append((side, name))
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        deadline = time.monotonic() + args.budget_s if args.budget_s > 0 else float("inf")
        futures = {pool.submit(run_side, side, name, args.out_dir, args.timeout, deadline): (side, name)
                   for side, name in jobs}
        for fut in concurrent.futures.as_completed(futures):
            side, name = futures[fut]
            results[(side, name)] = fut.result()
            res = results[(side, name)]
            state = "not run (budget)" if "not_run" in res else ("error" if "error" in res else "ok")
            print(f"[{time.perf_counter() - start:6.0f}s] {name} / {side}: {state}", file=sys.stderr, flush=True)
    for name in names:
        key = ("deepspeed", name)
        if key not in results:
            with open(os.path.join(args.out_dir, f"{name}.deepspeed.json")) as fh:
                results[key] = json.load(fh)
    rows = [row(n, results[("deepspeed", n)], results[("deepspeed_c", n)]) for n in names]
    print_table(rows)
    not_run = [r["config"] for r in rows if r["verdict"] == "NOT-RUN"]
    if not_run:
        print(f"\nNOT RUN within the {args.budget_s:.0f} s budget ({len(not_run)} of {len(rows)}): "
              + ", ".join(not_run))
    print(f"\ntotal {time.perf_counter() - start:.0f} s; records in {args.out_dir}")
    summary = [{k: v for k, v in r.items() if k != "problems"} for r in rows]
    with open(os.path.join(args.out_dir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=str)
    return 0 if all(r["verdict"] in ("PASS", "DS-CANNOT-RUN", "DIFFERS-BY-DESIGN", "NOT-RUN") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
