#!/usr/bin/env python3
"""test_train_gpt_pipe.py BIN DS_RUN WORKDIR CASE — train_gpt --pipe N under
tools/ds-run with a tiny model (cases: np2, np4, options).

np2:     --pipe 2 on 2 ranks (2 stages x 1 replica) against the unsplit run on
         one rank (--zero 1, the same --batch): the pipeline's micro-batches are
         that rank's batch cut in --micro-batches, so every logged loss and the
         last loss agree (to rounding), the held-out loss through ds_eval_batch
         and through the whole model rank 0 loads from the run's checkpoint
         equal the unsplit model's,
         and so does the held-out exact match; the loss falls; loss.png
         decodes; the checkpoint of the last step is written. The run saves at
         step 20 too (--save-every 20): resumed from it (--resume), --pipe 2
         ends exactly as the uninterrupted run (every line from step 20 on),
         and a plain 2-rank data-parallel run continues it sanely (its first
         logged loss within 10% of the pipeline's at that step, far below the
         first one; the held-out loss within 10%).
np4:     --pipe 2 on 4 ranks (2 stages x 2 replicas) against the 2-rank
         data-parallel run (replica d draws rank d's batches): the same weights,
         so the same held-out loss and exact match (the step losses differ: the
         data-parallel run logs rank 0's, the pipeline the replicas' mean);
         --pipe 2 --tp 2 on 4 ranks (2 stages x 1 replica x tp 2: every
         stage's layers split) against the unsplit one-rank run, as np2.
options: refusals, exit 2 naming the option: --pipe 3 on 2 ranks, --pipe 2 on
         one rank, --zero 2 with --pipe 2, --micro-batches without --pipe or
         not dividing --batch.
"""
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
    """The step losses train_gpt prints every steps_per_print steps."""
    return [float(x) for x in re.findall(r"^train_gpt: step \d+, .* ([0-9.]+)$", p.stdout, re.M)]


def last_loss(p):
    m = re.search(r"last (?:micro-)?batch loss ([0-9.]+)", p.stdout)
    return float(m.group(1)) if m else None


def accuracy(p):
    m = re.search(r"^held-out exact match: [01]\.\d{3} \(\d+/64\)$", p.stdout, re.M)
    return m.group(0) if m else None


def close(a, b, rel=1e-4):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-6)


def compare(pipe, ref, what, step_losses):
    """The pipeline run against the data-parallel reference: held-out loss and
    accuracy (the same weights), with step_losses the training losses too
    (one replica: a data-parallel run logs rank 0's loss, a pipeline the
    replicas' mean)."""
    lp, lr = logged_losses(pipe), logged_losses(ref)
    expect(len(lp) == 10 and len(lp) == len(lr), f"{what}: {len(lp)} logged losses, the reference {len(lr)}", pipe)
    for i, (a, b) in enumerate(zip(lp, lr) if step_losses else []):
        expect(close(a, b), f"{what}: logged loss {i} is {a}, the unsplit run's {b}", pipe)
    expect(not step_losses or close(last_loss(pipe), last_loss(ref)),
           f"{what}: last loss {last_loss(pipe)}, the unsplit run's {last_loss(ref)}", pipe)
    expect(lp and lp[-1] < 0.9 * lp[0], f"{what}: the loss did not fall: {lp}", pipe)
    expect(accuracy(pipe) is not None and accuracy(pipe) == accuracy(ref),
           f"{what}: accuracy '{accuracy(pipe)}', the unsplit run's '{accuracy(ref)}'", pipe)
    m = re.search(r"^held-out loss: ([0-9.]+) through the pipeline \(ds_eval_batch\), ([0-9.]+) by the whole model "
                  r"loaded from the checkpoint on rank 0, over 64 problems$", pipe.stdout, re.M)
    r = re.search(r"^held-out loss: ([0-9.]+) over 64 problems$", ref.stdout, re.M)
    expect(m and r, f"{what}: no held-out loss line", pipe)
    if m and r:
        through, whole, unsplit = (float(x) for x in (m.group(1), m.group(2), r.group(1)))
        # printed to 6 decimals; the same weights agree to float rounding
        expect(close(through, unsplit, 1e-5) and close(whole, unsplit, 1e-5),
               f"{what}: held-out loss {through} through the pipeline, {whole} by the whole model loaded on "
               f"rank 0, {unsplit} unsplit", pipe)


def check_outputs(p, out, what):
    png = os.path.join(out, "loss.png")
    expect(f"loss curve: {png} (40 points: the pipeline's batch losses)" in p.stdout,
           f"{what}: the PNG line is not printed", p)
    expect(os.path.isfile(png) and check_png.main(["--plot", png]) == 0, f"{what}: {png} is missing or bad", p)
    latest = os.path.join(out, "checkpoints", "latest")
    expect(os.path.isfile(latest) and open(latest).read() == "global_step40",
           f"{what}: no checkpoint of step 40 (checkpoints/latest)", p)


def case_np2(bin_, ds_run, work):
    out = os.path.join(work, "pipe")
    p = run([ds_run, "-n", "2", "--", bin_, "--pipe", "2"] + TINY + ["--save-every", "20", "--out", out], work)
    expect("pipeline: 2 ranks = 2 stages x 1 data-parallel replicas; per step each replica trains 4 "
           "micro-batches of 2" in p.stdout, "no pipeline layout line", p)
    expect("ZeRO-1 (a pipeline runs ZeRO 0 or 1)" in p.stdout, "the startup line does not say ZeRO-1", p)
    ref = run([bin_, "--zero", "1"] + TINY + ["--out", os.path.join(work, "ref")], work)
    compare(p, ref, "--pipe 2 on 2 ranks", True)
    check_outputs(p, out, "--pipe 2 on 2 ranks")
    ck20 = os.path.join(out, "checkpoints", "global_step20")
    r = run([ds_run, "-n", "2", "--", bin_, "--pipe", "2"] + TINY + ["--resume", ck20, "--out",
                                                                        os.path.join(work, "resumed")], work)
    resume_check.expect_exact_resume(p, r, 20, 40, expect, "--pipe 2 on 2 ranks")
    # the pipeline's checkpoint in a data-parallel run: another batch, so only close
    dp = run([ds_run, "-n", "2", "--", bin_, "--zero", "1"] + TINY + ["--resume", ck20, "--out",
                                                                         os.path.join(work, "dp")], work)
    lp, ld = logged_losses(p), logged_losses(dp)
    expect(len(lp) == 10 and len(ld) == 5, f"--pipe 2 resumed data-parallel: {len(ld)} logged losses", dp)
    if len(lp) == 10 and len(ld) == 5:
        expect(close(ld[0], lp[5], 0.1) and ld[0] < 0.9 * lp[0],
               f"--pipe 2 resumed data-parallel: step 24's loss {ld[0]}, the pipeline's {lp[5]} (first {lp[0]})", dp)
    m = re.search(r"^held-out loss: ([0-9.]+) through the pipeline", p.stdout, re.M)
    d = re.search(r"^held-out loss: ([0-9.]+) over 64 problems$", dp.stdout, re.M)
    expect(m and d and close(float(d.group(1)), float(m.group(1)), 0.1),
           "--pipe 2 resumed data-parallel: the held-out loss is not within 10% of the pipeline's", dp)


def case_np4(bin_, ds_run, work):
    out = os.path.join(work, "pipe")
    p = run([ds_run, "-n", "4", "--", bin_, "--pipe", "2", "--micro-batches", "2"] + TINY + ["--out", out], work)
    expect("pipeline: 4 ranks = 2 stages x 2 data-parallel replicas; per step each replica trains 2 "
           "micro-batches of 4" in p.stdout, "no pipeline layout line", p)
    ref = run([ds_run, "-n", "2", "--", bin_, "--zero", "1"] + TINY + ["--out", os.path.join(work, "ref")], work)
    compare(p, ref, "--pipe 2 on 4 ranks", False)
    check_outputs(p, out, "--pipe 2 on 4 ranks")
    out = os.path.join(work, "pipe_tp")
    p = run([ds_run, "-n", "4", "--", bin_, "--pipe", "2", "--tp", "2"] + TINY + ["--out", out], work)
    expect("pipeline: 4 ranks = 2 stages x 1 data-parallel replicas x tp 2; per step each replica trains 4 "
           "micro-batches of 2" in p.stdout, "--pipe 2 --tp 2: no pipeline layout line", p)
    ref = run([bin_, "--zero", "1"] + TINY + ["--out", os.path.join(work, "ref1")], work)
    compare(p, ref, "--pipe 2 --tp 2 on 4 ranks", True)
    check_outputs(p, out, "--pipe 2 --tp 2 on 4 ranks")


def case_options(bin_, ds_run, work):
    out = ["--out", os.path.join(work, "opts")]
    p = run([ds_run, "-n", "2", "--", bin_, "--pipe", "3", "--batch", "12"] + out, work, 2)
    expect("--pipe 3: 2 rank(s) cannot be laid out as 3 pipeline stages" in p.stderr,
           "--pipe 3 on 2 ranks is not refused naming --pipe and the rank count", p)
    p = run([bin_, "--pipe", "2"] + out, work, 2)
    expect("--pipe 2: 1 rank(s)" in p.stderr, "--pipe 2 on one rank is not refused", p)
    bad = [
        (["--pipe", "2", "--zero", "2"], "--zero 2: with --pipe 2"),
        (["--pipe", "2", "--zero", "3"], "--zero 3: with --pipe 2"),
        (["--micro-batches", "4"], "--micro-batches applies with --pipe > 1"),
        (["--pipe", "2", "--batch", "6"], "--batch 6: with --pipe 2 it is cut into --micro-batches 4"),
        (["--pipe", "2", "--micro-batches", "5"], "--micro-batches 5"),
        (["--pipe", "0"], "--pipe"),
    ]
    for args, text in bad:
        p = run([bin_] + args + out, work, 2)
        expect(text in p.stderr, f"{args}: the message does not say '{text}'", p)
    p = run([bin_, "--help"], work, 0)
    expect("--pipe N" in p.stdout and "--micro-batches M" in p.stdout, "--help does not describe --pipe", p)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    bin_, ds_run, work, case = os.path.abspath(argv[0]), os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    d = os.path.join(work, case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    globals()["case_" + case](bin_, ds_run, d)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print(f"train_gpt --pipe {case}: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
