#!/usr/bin/env python3
"""test_train_gpt_moe.py BIN DS_RUN WORKDIR CASE — train_gpt --moe-experts N
(and --ep-size P) with a tiny model (cases: np1, np2, combined, np4, options).

np1:     --moe-experts 4 on one rank: the startup line names the MoE layers,
         the parameter count is the GPT's (docs/MODELS.md) with layer h.1's MLP
         replaced by 4 expert MLPs and a gate (so the moe object reached the
         spec), the logged loss falls, the held-out loss is below ln(vocab)
         (the untrained model's), the exact-match line appears; a run saving
         at step 20 and resumed from that checkpoint ends with the
         uninterrupted run's last loss and held-out loss (within 1e-6
         relative): the gate's state comes back.
np2:     --moe-experts 4 --ep-size 2 on 2 ranks (each rank holds 2 of the 4
         experts): ZeRO-1 by default, every logged loss and the held-out loss
         finite, the loss falls, the held-out loss below ln(vocab), the
         exact-match line printed once, loss.png from the monitor, the
         checkpoint of the last step; the run saves at step 20 too
         (--save-every 20): resumed from it (--resume), --ep-size 2 ends
         exactly as the uninterrupted run (every line from step 20 on).
         --dtype bf16 with --ep-size 2: the embedded config asks
         for fp32 gradient accumulation (what the engine builds) and trains;
         a --config with bf16 and bf16 gradient buffers: the engine's refusal
         comes through with exit 2. (The numerical equality with one process is
         tests/mpi/test_moe_ep_engine.cpp's.)
combined: MoE with --pipe 2 and with --tp 2 on 2 ranks, each against the
         unsplit one-rank run with the same rows per forward (the pipeline
         with --micro-batches 1, since an MoE layer's capacity is per forward):
         every logged loss and the last loss agree within 1e-4 relative (the
         pipeline's loss holds both stages' aux terms), and so do the held-out
         loss (through ds_eval_batch for the pipeline) and the exact match of
         the tp run. The pipeline's whole model on rank 0 is loaded from the
         run's checkpoint with its dropout stream, so MoE's eval-time random
         token selection draws what the pipeline's ds_eval_batch drew (it
         runs the pipeline's micro-batches as its forwards): its held-out loss
         agrees too, and its exact-match line must appear.
np4:     --pipe 2 --ep-size 2 (2 stages x 2 replicas, experts split over the
         replicas of a stage) and --tp 2 --ep-size 2 (2 replicas x tp 2) on 4
         ranks against the 2-rank --ep-size 2 run (replica d draws rank d's
         batches): the same weights, so the same held-out loss (the pipeline's
         through ds_eval_batch and by the whole model loaded from the
         checkpoint, which holds every expert), and for tp the same logged
         losses and exact match.
options: refusals, exit 2 naming the option: --ep-size without --moe-experts,
         --ep-size not dividing --moe-experts or the rank count (or, with
         --pipe 2 / --tp 2 on 2 ranks, the one replica), --zero 2/3 with
         --ep-size 2.
"""
import math
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_png  # noqa: E402
import resume_check  # noqa: E402

TINY = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--batch", "8", "--eval-problems", "64",
        "--digits", "2", "--lr", "0.01", "--steps", "40"]
failures = []


def run(cmd, cwd, expect_rc=0):
    env = dict(os.environ, OMP_NUM_THREADS="1", DS_LOG_LEVEL="warn")
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    if p.returncode != expect_rc:
        failures.append(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect_rc}\n"
                        f"--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
    return p


def expect(cond, what, p=None):
    if not cond:
        failures.append(what + (f"\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}" if p else ""))


def logged_losses(p):
    return [float(x) for x in re.findall(r"^train_gpt: step \d+, .* (\S+)$", p.stdout, re.M)]


def last_loss(p):
    m = re.search(r"last (?:micro-)?batch loss (\S+)", p.stdout)
    return float(m.group(1)) if m else None


def heldout_loss(p):
    m = re.search(r"^held-out loss: (\S+) over 64 problems$", p.stdout, re.M)
    return float(m.group(1)) if m else None


def pipe_heldout(p):
    """(through the pipeline, by the whole model loaded from the checkpoint)."""
    m = re.search(r"^held-out loss: (\S+) through the pipeline \(ds_eval_batch\), (\S+) by the whole model "
                  r"loaded from the checkpoint on rank 0, over 64 problems$", p.stdout, re.M)
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)


def close(a, b, rel):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-6)


def model_line(p):
    """(block, vocab, parameters) from the startup line."""
    m = re.search(r"^model: GPT n_layer=2 n_head=2 n_embd=16 block=(\d+) vocab=(\d+), (\d+) parameters$",
                  p.stdout, re.M)
    return tuple(int(x) for x in m.groups()) if m else None


def accuracy_lines(p):
    return re.findall(r"^held-out exact match: [01]\.\d{3} \(\d+/64\)$", p.stdout, re.M)


def check_training(p, vocab, what):
    losses = logged_losses(p)
    expect(len(losses) == 10, f"{what}: {len(losses)} logged losses, expected 10", p)
    expect(all(math.isfinite(x) for x in losses), f"{what}: a logged loss is not finite: {losses}", p)
    expect(losses and losses[-1] < 0.9 * losses[0], f"{what}: the loss did not fall: {losses}", p)
    held = heldout_loss(p)
    # the untrained model predicts about uniformly: ln(vocab)
    expect(held is not None and math.isfinite(held) and held < 0.9 * math.log(vocab),
           f"{what}: held-out loss {held}, the untrained model's is about ln({vocab}) = {math.log(vocab):.3f}", p)
    acc = accuracy_lines(p)
    expect(len(acc) == 1, f"{what}: {len(acc)} exact-match lines, expected one", p)


def case_np1(bin_, ds_run, work):
    out = os.path.join(work, "moe")
    p = run([bin_, "--moe-experts", "4"] + TINY + ["--out", out], work)
    expect("MoE: 4 experts in every 2nd layer, ep_size 1 (each rank holds 4/4 experts of each MoE layer)"
           in p.stdout, "no MoE startup line", p)
    ml = model_line(p)
    expect(ml is not None, "no model line", p)
    if ml is None:
        return
    S, V, n = ml
    C, L, E = 16, 2, 4
    dense = V * C + S * C + L * (12 * C * C + 4 * C + 9 * C) + 2 * C  # docs/MODELS.md, tied head
    mlp = (C * 4 * C + 4 * C) + (4 * C * C + C)                        # c_fc, c_proj with biases
    gate = C * E                                                       # DeepSpeed's TopKGate: no bias
    expect(n == dense + (E - 1) * mlp + gate,
           f"--moe-experts 4: {n} parameters, expected {dense} + 3 expert MLPs {3 * mlp} + gate {gate}", p)
    check_training(p, V, "--moe-experts 4 on one rank")
    half = os.path.join(work, "half")
    run([bin_, "--moe-experts", "4", "--save-every", "20"] + TINY + ["--out", half], work)
    r = run([bin_, "--moe-experts", "4", "--resume", os.path.join(half, "checkpoints", "global_step20")] + TINY +
            ["--out", os.path.join(work, "resumed")], work)
    expect("resumed from" in r.stdout and "at step 20" in r.stdout, "the MoE run did not resume at step 20", r)
    for name, f in (("last loss", last_loss), ("held-out loss", heldout_loss)):
        a, b = f(r), f(p)
        expect(a is not None and b is not None and abs(a - b) <= 1e-6 * max(abs(b), 1e-6),
               f"--moe-experts 4 resumed at step 20: {name} {a}, the uninterrupted run's {b}", r)


def case_np2(bin_, ds_run, work):
    out = os.path.join(work, "ep")
    p = run([ds_run, "-n", "2", "--", bin_, "--moe-experts", "4", "--ep-size", "2"] + TINY +
            ["--save-every", "20", "--out", out], work)
    expect("MoE: 4 experts in every 2nd layer, ep_size 2 (each rank holds 2/4 experts of each MoE layer)"
           in p.stdout, "no MoE startup line", p)
    expect("embedded config: ZeRO-1 (expert parallelism runs ZeRO 0 or 1)" in p.stdout,
           "the startup line does not say ZeRO-1 for expert parallelism", p)
    ml = model_line(p)
    expect(ml is not None, "no model line", p)
    if ml is None:
        return
    check_training(p, ml[1], "--moe-experts 4 --ep-size 2 on 2 ranks")
    png = os.path.join(out, "loss.png")
    expect(os.path.isfile(png) and check_png.main(["--plot", png]) == 0, f"{png} is missing or bad", p)
    latest = os.path.join(out, "checkpoints", "latest")
    expect(os.path.isfile(latest) and open(latest).read() == "global_step40", "no checkpoint of step 40", p)
    ep2 = [ds_run, "-n", "2", "--", bin_, "--moe-experts", "4", "--ep-size", "2"]
    r = run(ep2 + TINY + ["--resume", os.path.join(out, "checkpoints", "global_step20"), "--out",
                          os.path.join(work, "resumed")], work)
    resume_check.expect_exact_resume(p, r, 20, 40, expect, "--moe-experts 4 --ep-size 2 on 2 ranks")
    p = run(ep2 + ["--dtype", "bf16"] + TINY + ["--out", os.path.join(work, "bf16")], work)
    expect("bf16 with fp32 gradient accumulation" in p.stdout, "--dtype bf16: the startup line does not say fp32 "
           "gradient accumulation", p)
    check_training(p, ml[1], "--moe-experts 4 --ep-size 2 --dtype bf16 on 2 ranks")
    cfg = os.path.join(work, "bf16.json")
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},\n'
                ' "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}}\n')
    p = run(ep2 + ["--config", cfg, "--steps", "2", "--out", os.path.join(work, "cfg")], work, 2)
    expect("expert parallelism is built for fp32 gradient accumulation" in p.stderr + p.stdout,
           "a bf16 --config without fp32 gradient accumulation: the engine's refusal does not come through", p)


def same_training(p, ref, what):
    """Every logged loss and the last loss of p equal ref's (to rounding)."""
    lp, lr = logged_losses(p), logged_losses(ref)
    expect(len(lp) == 10 and len(lp) == len(lr), f"{what}: {len(lp)} logged losses, the reference {len(lr)}", p)
    for i, (a, b) in enumerate(zip(lp, lr)):
        expect(close(a, b, 1e-4), f"{what}: logged loss {i} is {a}, the unsplit run's {b}", p)
    expect(close(last_loss(p), last_loss(ref), 1e-4),
           f"{what}: last loss {last_loss(p)}, the unsplit run's {last_loss(ref)}", p)


def same_pipe_heldout(p, ref, what, whole_rel):
    through, whole = pipe_heldout(p)
    want = heldout_loss(ref)
    expect(close(through, want, 1e-5), f"{what}: held-out loss {through} through the pipeline, {want} unsplit", p)
    expect(close(whole, want, whole_rel), f"{what}: held-out loss {whole} of the whole model, {want} unsplit", p)
    expect(len(accuracy_lines(p)) == 1, f"{what}: {len(accuracy_lines(p))} exact-match lines, expected one", p)
    latest = os.path.join(p.out, "checkpoints", "latest")
    expect(os.path.exists(latest) and open(latest).read().strip() == "global_step40",
           f"{what}: no checkpoint of step 40 (checkpoints/latest)", p)


def same_tp_eval(t, ref, what):
    expect(close(heldout_loss(t), heldout_loss(ref), 1e-4),
           f"{what}: held-out loss {heldout_loss(t)}, the unsplit run's {heldout_loss(ref)}", t)
    acc, acc_ref = accuracy_lines(t), accuracy_lines(ref)
    expect(len(acc) == 1 and acc == acc_ref, f"{what}: accuracy {acc}, the unsplit run's {acc_ref}", t)


def run_out(cmd, work, name):
    out = os.path.join(work, name)
    p = run(cmd + TINY + ["--out", out], work)
    p.out = out
    return p


def case_combined(bin_, ds_run, work):
    moe = ["--moe-experts", "4"]
    p = run_out([ds_run, "-n", "2", "--", bin_, "--pipe", "2", "--micro-batches", "1"] + moe, work, "pipe")
    expect("pipeline: 2 ranks = 2 stages x 1 data-parallel replicas; per step each replica trains 1 "
           "micro-batches of 8" in p.stdout, "--pipe 2 --moe-experts 4: no pipeline layout line", p)
    expect("MoE: 4 experts in every 2nd layer, ep_size 1" in p.stdout, "--pipe 2: no MoE startup line", p)
    ref = run_out([bin_, "--zero", "1"] + moe, work, "ref_pipe")
    same_training(p, ref, "--pipe 2 --moe-experts 4")
    same_pipe_heldout(p, ref, "--pipe 2 --moe-experts 4", 1e-5)
    expect(logged_losses(p) and logged_losses(p)[-1] < 0.9 * logged_losses(p)[0], "--pipe 2: the loss did not fall", p)

    t = run_out([ds_run, "-n", "2", "--", bin_, "--tp", "2"] + moe, work, "tp")
    expect("tensor parallel: 2 ranks = 1 replicas x tp 2" in t.stdout, "--tp 2 --moe-experts 4: no layout line", t)
    ref = run_out([bin_, "--zero", "2"] + moe, work, "ref_tp")
    same_training(t, ref, "--tp 2 --moe-experts 4")
    same_tp_eval(t, ref, "--tp 2 --moe-experts 4")


def case_np4(bin_, ds_run, work):
    moe = ["--moe-experts", "4", "--ep-size", "2"]
    ref = run_out([ds_run, "-n", "2", "--", bin_] + moe, work, "ref")
    p = run_out([ds_run, "-n", "4", "--", bin_, "--pipe", "2", "--micro-batches", "1"] + moe, work, "pipe")
    expect("pipeline: 4 ranks = 2 stages x 2 data-parallel replicas" in p.stdout, "--pipe 2 on 4 ranks: no layout "
           "line", p)
    expect("expert groups of --ep-size consecutive replicas of each stage" in p.stdout,
           "--pipe 2 --ep-size 2: the MoE line does not say where the expert groups are", p)
    same_pipe_heldout(p, ref, "--pipe 2 --moe-experts 4 --ep-size 2 on 4 ranks", 1e-5)
    t = run_out([ds_run, "-n", "4", "--", bin_, "--tp", "2"] + moe, work, "tp")
    expect("expert groups of --ep-size consecutive replicas of each tp rank" in t.stdout,
           "--tp 2 --ep-size 2: the MoE line does not say where the expert groups are", t)
    same_training(t, ref, "--tp 2 --moe-experts 4 --ep-size 2 on 4 ranks")
    same_tp_eval(t, ref, "--tp 2 --moe-experts 4 --ep-size 2 on 4 ranks")


def case_options(bin_, ds_run, work):
    out = ["--out", os.path.join(work, "opts")]
    p = run([bin_, "--moe-experts", "4", "--ep-size", "2"] + out, work, 2)
    expect("--ep-size 2: 1 rank(s) cannot be laid out as expert groups of 2" in p.stderr,
           "--ep-size 2 on one rank is not refused naming --ep-size and the rank count", p)
    bad = [
        (["--ep-size", "2"], "--ep-size 2 applies with --moe-experts N only"),
        (["--moe-experts", "4", "--ep-size", "3"], "--ep-size 3 does not divide --moe-experts 4"),
        (["--moe-experts", "4", "--ep-size", "2", "--zero", "2"], "--zero 2: with --ep-size 2"),
        (["--moe-experts", "4", "--ep-size", "2", "--zero", "3"], "--zero 3: with --ep-size 2"),
        (["--moe-experts", "-1"], "--moe-experts: '-1' is not an integer"),
        (["--moe-experts", "4", "--ep-size", "0"], "--ep-size: '0' is not an integer"),
    ]
    for args, text in bad:
        p = run([bin_] + args + out, work, 2)
        expect(text in p.stderr, f"{args}: the message does not say '{text}'", p)
    for flag in ("--pipe", "--tp"):  # 2 ranks leave one replica: no expert group of 2
        p = run([ds_run, "-n", "2", "--", bin_, flag, "2", "--moe-experts", "4", "--ep-size", "2"] + out, work, 2)
        expect(f"--ep-size 2: the 1 data-parallel replicas (2 rank(s) / {flag} 2) cannot be laid out as expert "
               "groups of 2" in p.stderr, f"{flag} 2 --ep-size 2 on 2 ranks is not refused naming --ep-size", p)
    p = run([bin_, "--help"], work, 0)
    expect("--moe-experts N" in p.stdout and "--ep-size P" in p.stdout, "--help does not describe MoE", p)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    bin_, ds_run, work, case = os.path.abspath(argv[0]), os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    d = os.path.join(work, "moe_" + case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    globals()["case_" + case](bin_, ds_run, d)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print(f"train_gpt --moe-experts {case}: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
