"""The figures of a gpu-check report: what the README's GPU table needs,
read from the log `run` wrote (report.txt), with the targets beside them.

    python3 figures.py report.txt
"""
import json
import re
import statistics
import sys


def median(xs):
    return statistics.median(xs) if xs else None


def main(path):
    text = open(path, errors="replace").read()
    out = []
    passed = len(re.findall(r"^\s*--- PASS", text, re.M))
    failed = re.findall(r"^\s*--- FAIL: (\S+)", text, re.M)
    if passed or failed:
        out.append(f"go tests        {passed} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))

    # Copies: MB/s of the device's pinned copies against the raw loop.
    copy = {}
    for name, mbs in re.findall(r"^BenchmarkCUDACopy/(\S+?)-\d+\s+\d+\s+\S+ ns/op\s+(\S+) MB/s", text, re.M):
        copy.setdefault(name, []).append(float(mbs))
    for size in sorted({n.split("/")[1] for n in copy}, key=lambda s: int(s.rstrip("MiB"))):
        raw, dev = median(copy.get("raw-pinned/" + size, [])), median(copy.get("device-pinned/" + size, []))
        if raw and dev:
            out.append(f"copy {size:>6}     device {dev / 1000:.1f} GB/s, raw loop {raw / 1000:.1f} GB/s: {dev / raw:.2f}x (target >= 0.80)")

    # Training throughput: pipe's BenchmarkTrainStep against PyTorch eager,
    # round by round (interleaved), medians of the ratios.
    ours = {}
    for name, ips in re.findall(r"^BenchmarkTrainStep/(\S+?)-\d+\s+\d+\s+\S+ ns/op\s+(\S+) images/s", text, re.M):
        model = "keras_cnn" if name.startswith("keras_cnn") else name
        ours.setdefault(model, []).append(float(ips))
    theirs = {}
    for line in re.findall(r'^\{"framework": "pytorch.*\}$', text, re.M):
        d = json.loads(line)
        theirs.setdefault(d["model"], []).append(d["images_per_sec"])
    for model in sorted(ours):
        a, b = ours[model], theirs.get(model, [])
        ratios = [x / y for x, y in zip(a, b)]
        line = f"train {model:<10} pipe {median(a):.0f} images/s"
        if b:
            line += f", PyTorch eager {median(b):.0f}: {median(ratios):.2f}x (pairs {', '.join(f'{r:.2f}' for r in ratios)}; target >= 0.70)"
        out.append(line)

    # The data stall of pipe run training from the prefetch queues.
    stalls = []
    for line in re.findall(r'^\{"epoch":.*"device_stall_pct".*\}$', text, re.M):
        d = json.loads(line)
        stalls.append((d["epoch"], d["stall_pct"], d.get("images_per_sec", 0)))
    if stalls:
        later = [s for e, s, _ in stalls if e > 0]
        out.append("stall           " + ", ".join(f"epoch {e}: {s:.2f}% ({ips:.0f} images/s)" for e, s, ips in stalls)
                   + (f"; after epoch 0 at most {max(later):.2f}% (target < 1%)" if later else ""))

    m = re.search(r"feed_loop: (\d+) batches .* = (\d+) images/s", text)
    if m:
        out.append(f"pipefeed loop   {m.group(1)} batches at {m.group(2)} images/s without synchronising")
    print("\n".join(out) if out else "no figures in this report")


if __name__ == "__main__":
    main(sys.argv[1])
