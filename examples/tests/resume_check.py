"""Shared by the train_gpt example tests: a run resumed from a checkpoint of
step K must end exactly as the uninterrupted run (every line train_gpt
prints from step K on: the logged step losses, the last loss, the held-out
loss, the decoded samples and the exact match)."""
import re


def _after(p, k):
    """The lines of a run's output that describe steps after K and the results."""
    out = []
    for line in p.stdout.splitlines():
        m = re.match(r"^train_gpt: step (\d+), ", line)
        if m and int(m.group(1)) > k:
            out.append(line)
        elif line.startswith(("held-out ", "  ")):  # held-out loss / exact match, decoded samples
            out.append(line)
        else:
            m = re.search(r"last (?:micro-)?batch loss (\S+)$", line)
            if m:
                out.append("last loss " + m.group(1))
    return out


def expect_exact_resume(full, resumed, k, steps, expect, what):
    expect(f"at step {k}" in resumed.stdout and f"trained steps {k}..{steps}" in resumed.stdout,
           f"{what}: the run did not resume at step {k} and train to {steps}", resumed)
    a, b = _after(full, k), _after(resumed, k)
    expect(any(line.startswith("train_gpt: step") for line in a) and any(line.startswith("held-out") for line in a),
           f"{what}: the uninterrupted run printed no step losses or held-out lines after step {k}", full)
    expect(a == b, f"{what}: resumed at step {k}, the output differs from the uninterrupted run's:\n  "
           + "\n  ".join(f"{x!r} | {y!r}" for x, y in zip(a, b) if x != y)
           + (f"\n  ({len(a)} lines, resumed {len(b)})" if len(a) != len(b) else ""), resumed)
