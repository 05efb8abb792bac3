#!/usr/bin/env python3
"""test_train_gpt_tp.py BIN DS_RUN WORKDIR CASE — train_gpt --tp N under
tools/ds-run with a tiny model (cases: np2, np4, options).

np2:     --tp 2 on 2 ranks (1 replica x tp 2) against the unsplit run on one
         rank (the same --batch and ZeRO-2): both ranks of the group train
         replica 0's batches, which are that rank's, so every logged loss, the
         last loss and the held-out loss agree within 1e-4 relative, and the
         held-out exact match is the same line, printed once; the loss falls;
         loss.png decodes from the monitor's 40 rows; the checkpoint of the
         last step is written. The run saves at step 20 too (--save-every 20):
         resumed from it (--resume), --tp 2 ends exactly as the uninterrupted
         run (every line from step 20 on).
np4:     --tp 2 on 4 ranks (2 replicas x tp 2) against the 2-rank
         data-parallel run (replica d draws rank d's batches): the same
         numbers (the logged losses are replica 0's and rank 0's).
options: refusals, exit 2 naming the option: --tp 2 on one rank, --pipe 2
         --tp 2 on 2 ranks (4 needed), --zero 3 with --tp 2, --n-head not a
         multiple of --tp, --tp 0, a
         --config whose autotp_size is not --tp (set to another value or
         absent).
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
    m = re.search(r"last micro-batch loss ([0-9.]+)", p.stdout)
    return float(m.group(1)) if m else None


def heldout_loss(p):
    m = re.search(r"^held-out loss: ([0-9.]+) over 64 problems$", p.stdout, re.M)
    return float(m.group(1)) if m else None


def accuracy_lines(p):
    return re.findall(r"^held-out exact match: [01]\.\d{3} \(\d+/64\)$", p.stdout, re.M)


def close(a, b, rel=1e-4):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-6)


def compare(tp, ref, what):
    """The tensor-parallel run against the reference that trains the same
    replicas' batches without splitting the layers."""
    lt, lr = logged_losses(tp), logged_losses(ref)
    expect(len(lt) == 10 and len(lt) == len(lr), f"{what}: {len(lt)} logged losses, the reference {len(lr)}", tp)
    for i, (a, b) in enumerate(zip(lt, lr)):
        expect(close(a, b), f"{what}: logged loss {i} is {a}, the unsplit run's {b}", tp)
    expect(close(last_loss(tp), last_loss(ref)), f"{what}: last loss {last_loss(tp)}, the unsplit run's "
           f"{last_loss(ref)}", tp)
    expect(lt and lt[-1] < 0.9 * lt[0], f"{what}: the loss did not fall: {lt}", tp)
    expect(close(heldout_loss(tp), heldout_loss(ref)),
           f"{what}: held-out loss {heldout_loss(tp)}, the unsplit run's {heldout_loss(ref)}", tp)
    acc, acc_ref = accuracy_lines(tp), accuracy_lines(ref)
    expect(len(acc) == 1, f"{what}: {len(acc)} exact-match lines, expected one", tp)
    expect(acc == acc_ref, f"{what}: accuracy {acc}, the unsplit run's {acc_ref}", tp)


def check_outputs(p, out, what):
    png = os.path.join(out, "loss.png")
    csv = os.path.join(out, "monitor", "train_gpt", "Train_Samples_train_loss.csv")
    expect(f"loss curve: {png} (40 points from {csv})" in p.stdout,
           f"{what}: the PNG line does not say 40 points from the monitor (one writer)", p)
    expect(os.path.isfile(png) and check_png.main(["--plot", png]) == 0, f"{what}: {png} is missing or bad", p)
    latest = os.path.join(out, "checkpoints", "latest")
    expect(os.path.isfile(latest) and open(latest).read() == "global_step40",
           f"{what}: no checkpoint of step 40 (checkpoints/latest)", p)


def case_np2(bin_, ds_run, work):
    out = os.path.join(work, "tp")
    p = run([ds_run, "-n", "2", "--", bin_, "--tp", "2"] + TINY + ["--save-every", "20", "--out", out], work)
    expect("tensor parallel: 2 ranks = 1 replicas x tp 2; each group of 2 consecutive ranks shares every "
           "transformer layer (1 of 2 heads and 32 of 64 MLP columns a rank)" in p.stdout, "no layout line", p)
    expect("ZeRO-2 over the 1 replicas, tensor_parallel.autotp_size 2" in p.stdout,
           "the startup line does not name the config's tensor_parallel", p)
    ref = run([bin_, "--zero", "2"] + TINY + ["--out", os.path.join(work, "ref")], work)
    compare(p, ref, "--tp 2 on 2 ranks")
    check_outputs(p, out, "--tp 2 on 2 ranks")
    r = run([ds_run, "-n", "2", "--", bin_, "--tp", "2"] + TINY +
            ["--resume", os.path.join(out, "checkpoints", "global_step20"), "--out", os.path.join(work, "resumed")],
            work)
    resume_check.expect_exact_resume(p, r, 20, 40, expect, "--tp 2 on 2 ranks")


def case_np4(bin_, ds_run, work):
    out = os.path.join(work, "tp")
    p = run([ds_run, "-n", "4", "--", bin_, "--tp", "2", "--zero", "1"] + TINY + ["--out", out], work)
    expect("tensor parallel: 4 ranks = 2 replicas x tp 2" in p.stdout, "no layout line", p)
    ref = run([ds_run, "-n", "2", "--", bin_, "--zero", "1"] + TINY + ["--out", os.path.join(work, "ref")], work)
    compare(p, ref, "--tp 2 on 4 ranks")
    check_outputs(p, out, "--tp 2 on 4 ranks")


def case_options(bin_, ds_run, work):
    out = ["--out", os.path.join(work, "opts")]
    p = run([bin_, "--tp", "2"] + out, work, 2)
    expect("--tp 2: 1 rank(s) cannot be laid out as tensor-parallel groups of 2" in p.stderr,
           "--tp 2 on one rank is not refused naming --tp and the rank count", p)
    p = run([ds_run, "-n", "2", "--", bin_, "--tp", "2", "--pipe", "2"] + out, work, 2)
    expect("--pipe 2 --tp 2: 2 rank(s) cannot be laid out as 2 stages x replicas x tp 2" in p.stderr + p.stdout,
           "--pipe 2 --tp 2 on 2 ranks is not refused naming both and the rank count", p)
    bad = [
        (["--tp", "2", "--zero", "3"], "--zero 3: with --tp 2"),
        (["--tp", "3"], "--tp 3: --n-head 8 is not a multiple of it"),
        (["--tp", "0"], "--tp: '0' is not an integer"),
    ]
    for args, text in bad:
        p = run([bin_] + args + out, work, 2)
        expect(text in p.stderr, f"{args}: the message does not say '{text}'", p)
    cfg = os.path.join(work, "tp2.json")
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},\n'
                ' "tensor_parallel": {"autotp_size": 2}}\n')
    p = run([bin_, "--config", cfg] + out, work, 2)
    expect("sets tensor_parallel.autotp_size 2 and the command line says --tp 1" in p.stderr,
           "a --config with autotp_size 2 and no --tp is not refused", p)
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}\n')
    p = run([bin_, "--config", cfg, "--tp", "2"] + out, work, 2)
    expect("has no tensor_parallel.autotp_size and the command line says --tp 2" in p.stderr,
           "--tp 2 with a --config without tensor_parallel is not refused", p)
    p = run([bin_, "--help"], work, 0)
    expect("--tp N" in p.stdout and "2 replicas x tp 2" in p.stdout, "--help does not describe --tp", p)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    bin_, ds_run, work, case = os.path.abspath(argv[0]), os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    d = os.path.join(work, "tp_" + case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    globals()["case_" + case](bin_, ds_run, d)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print(f"train_gpt --tp {case}: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
