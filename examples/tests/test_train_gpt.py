#!/usr/bin/env python3
"""test_train_gpt.py BIN WORKDIR [CASE...] — train_gpt end to end, short runs
of a tiny model on one rank (cases: run, resume, text, config, options; default all).

run:     trains 20 steps (checkpoints at 10 and 20), prints the accuracy line,
         writes a loss.png that Python's zlib decodes (check_png.py);
resume:  --resume DIR/global_step20 continues to step 30 with the last loss of
         the uninterrupted run (resume is exact); --resume DIR loads the
         latest; a checkpoint of another model or task is refused with exit 2;
text:    --text FILE reports the held-out loss and samples a line;
config:  --config FILE: its micro-batch, accumulation and csv_monitor path are
         used; without csv_monitor no PNG (said so); a bad key exits 2;
options: bad options exit 2 with a message naming the option.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_png  # noqa: E402

TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--batch", "8", "--eval-problems", "50",
        "--digits", "2"]
failures = []


def run(bin_, args, cwd, expect_rc=0):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([bin_] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != expect_rc:
        failures.append(f"{' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n"
                        f"--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
    return p


def expect(cond, what, p=None):
    if not cond:
        failures.append(what + (f"\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}" if p else ""))


def last_loss(p):
    m = re.search(r"last micro-batch loss ([0-9.]+)", p.stdout)
    return m.group(1) if m else None


def case_run(bin_, work):
    out = os.path.join(work, "runs", "first")  # --out makes its missing parents
    p = run(bin_, TINY + ["--steps", "20", "--save-every", "10", "--out", out], work)
    expect(re.search(r"^held-out exact match: [01]\.\d{3} \(\d+/50\)$", p.stdout, re.M),
           "no accuracy line", p)
    ck = os.path.join(out, "checkpoints")
    for tag in ("global_step10", "global_step20"):
        expect(os.path.isfile(os.path.join(ck, tag, "manifest.json")), f"no checkpoint {tag}", p)
    expect(os.path.isfile(os.path.join(ck, "latest")) and open(os.path.join(ck, "latest")).read() == "global_step20",
           "latest does not name global_step20", p)
    png = os.path.join(out, "loss.png")
    expect(f"loss curve: {png}" in p.stdout, "the PNG path is not printed", p)
    if os.path.isfile(png):
        expect(check_png.main(["--plot", png]) == 0, f"{png} does not decode as a plot")
    else:
        expect(False, f"{png} missing", p)
    csv = os.path.join(out, "monitor", "train_gpt", "Train_Samples_train_loss.csv")
    if os.path.isfile(csv):
        rows = [l for l in open(csv).read().splitlines() if l and not l.startswith("step,")]
        expect(len(rows) == 20 and rows[-1].startswith("160,"), f"{csv}: {len(rows)} rows, last {rows[-1:]}")


def case_resume(bin_, work):
    a, b = os.path.join(work, "resume_a"), os.path.join(work, "resume_b")
    # uninterrupted: 30 steps, checkpoints at 10, 20 and 30
    p1 = run(bin_, TINY + ["--steps", "30", "--save-every", "10", "--out", a], work)
    # resumed from step 20 of the same run (same config, so the same LR schedule)
    ck20 = os.path.join(a, "checkpoints", "global_step20")
    p2 = run(bin_, TINY + ["--steps", "30", "--out", b, "--resume", ck20], work)
    expect(f"resumed from {ck20} at step 20" in p2.stdout, "no resume line", p2)
    expect("trained steps 20..30" in p2.stdout, "the resumed run did not continue from 20 to 30", p2)
    expect(os.path.isfile(os.path.join(b, "checkpoints", "global_step30", "manifest.json")), "no global_step30", p2)
    la, lb = last_loss(p1), last_loss(p2)
    expect(la is not None and la == lb, f"resumed last loss {lb} != uninterrupted {la}", p2)
    # DIR alone: its latest (30), nothing left to train
    p3 = run(bin_, TINY + ["--steps", "30", "--out", b, "--resume", os.path.join(a, "checkpoints")], work)
    expect("at step 30" in p3.stdout and "trained steps 30..30" in p3.stdout, "--resume DIR did not load latest", p3)
    # another model size, another task: refused (exit 2), the option named
    p4 = run(bin_, TINY[:4] + ["--n-embd", "32"] + TINY[6:] + ["--steps", "30", "--out", b, "--resume", ck20],
             work, 2)
    expect("--resume" in p4.stderr, "a checkpoint of another model size was not refused by name", p4)
    p5 = run(bin_, TINY[:-2] + ["--digits", "3", "--steps", "30", "--out", b, "--resume", ck20], work, 2)
    expect("--resume" in p5.stderr, "a checkpoint of another task was not refused", p5)
    p6 = run(bin_, TINY + ["--out", b, "--resume", os.path.join(work, "no-such-dir")], work, 2)
    expect("no-such-dir" in p6.stderr, "a missing --resume directory is not named", p6)


def case_text(bin_, work):
    path = os.path.join(work, "lines.txt")
    with open(path, "w") as f:
        for i in range(200):
            f.write(f"the {i % 7} little pigs went to market number {i % 11}\n")
    out = os.path.join(work, "text")
    p = run(bin_, ["--text", path, "--block-size", "32", "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
                   "--batch", "8", "--steps", "15", "--eval-problems", "16", "--out", out], work)
    expect(re.search(r"^held-out loss: \d+\.\d{4} \(perplexity [\d.]+\) over 16 windows of 32 characters$",
                     p.stdout, re.M), "no held-out loss line", p)
    expect(re.search(r"^sample: ", p.stdout, re.M), "no sample line", p)
    short = os.path.join(work, "short.txt")
    with open(short, "w") as f:
        f.write("too short")
    p = run(bin_, ["--text", short, "--out", out], work, 2)
    expect("--text" in p.stderr and "short.txt" in p.stderr, "a too short text is not refused by name", p)


def case_config(bin_, work):
    cfg = os.path.join(work, "ds_config.json")
    mon = os.path.join(work, "mon")
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, '
                '"optimizer": {"type": "Adam", "params": {"lr": 0.001}}, '
                '"csv_monitor": {"enabled": true, "output_path": "%s", "job_name": "j"}}' % mon)
    out = os.path.join(work, "out")
    p = run(bin_, TINY[:6] + TINY[8:] + ["--config", cfg, "--steps", "6", "--out", out], work)
    expect("micro-batch 4 per rank, config " + cfg in p.stdout, "the config file's micro-batch is not used", p)
    expect("trained steps 0..6" in p.stdout, "6 optimizer steps (12 micro-batches) were not trained", p)
    expect(f"loss curve: {out}/loss.png (6 points from {mon}/j/Train_Samples_train_loss.csv)" in p.stdout,
           "the PNG is not drawn from the config's csv_monitor path", p)
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "Adam", "params": {"lr": 0.001}}}')
    p = run(bin_, TINY[:6] + TINY[8:] + ["--config", cfg, "--steps", "2", "--out", out], work)
    expect("loss curve: not written (csv_monitor is not enabled in the config)" in p.stdout,
           "no note that the config has no csv_monitor", p)
    with open(cfg, "w") as f:
        f.write('{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stagee": 1}}')
    p = run(bin_, TINY[:6] + TINY[8:] + ["--config", cfg, "--out", out], work, 2)
    expect("stagee" in p.stderr, "a bad key in --config is not named", p)


def case_options(bin_, work):
    cfg = os.path.join(work, "ds_config.json")
    with open(cfg, "w") as f:
        f.write("{}")
    bad = [
        (["--steps", "0"], "--steps"), (["--steps", "ten"], "--steps"), (["--zero", "5"], "--zero"),
        (["--dtype", "fp64"], "--dtype"), (["--n-head", "3"], "--n-head"), (["--lr", "-1"], "--lr"),
        (["--bogus"], "--bogus"), (["--steps"], "--steps"), (["stray"], "stray"),
        (["--config", cfg, "--zero", "1"], "--zero"), (["--block-size", "8"], "--block-size"),
        (["--text", os.path.join(work, "missing.txt")], "missing.txt"), (["--digits", "10"], "--digits"),
        (["--config", os.path.join(work, "missing.json")], "missing.json"),
    ]
    for args, name in bad:
        p = run(bin_, args + ["--out", os.path.join(work, "opts")], work, 2)
        expect(name in p.stderr, f"{args}: the message does not name {name}", p)
    blocker = os.path.join(work, "a-file")
    with open(blocker, "w") as f:
        f.write("not a directory")
    p = run(bin_, ["--steps", "1", "--out", os.path.join(blocker, "run")], work, 2)
    expect("--out: cannot create" in p.stderr and "a-file" in p.stderr, "an --out under a file is not named", p)
    p = run(bin_, ["--help"], work, 0)
    expect("--n-layer" in p.stdout, "--help prints no usage", p)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    bin_, work = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    cases = argv[2:] or ["run", "resume", "text", "config", "options"]
    for case in cases:
        d = os.path.join(work, case)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        globals()["case_" + case](bin_, d)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print(f"train_gpt {' '.join(cases)}: {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
