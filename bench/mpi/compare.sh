#!/usr/bin/env bash
# Compares keras_cnn's training throughput (batch 128) as two MPI ranks of
# one thread each (mpirun -np 2, devices=cpu:1) with one process of two
# threads, as two replicas (devices=cpu:2: the same model, bit for bit) and
# as one replica, in PAIRS interleaved rounds (default 3), and prints each
# run's images/s and per-step all-reduce time (epoch 1 of bench/mpi/
# keras_cnn.pipe, STEPS steps, default 20), then the medians.
#
#   scripts/openmpi && go build -tags mpi -o /tmp/pipe ./cmd/pipe
#   bench/mpi/compare.sh /tmp/pipe
set -euo pipefail
pipe=${1:?usage: bench/mpi/compare.sh PIPE_BINARY (built with -tags mpi)}
pairs=${PAIRS:-3}
file=$(dirname "$0")/keras_cnn.pipe
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
results=$(mktemp)
trap 'rm -f "$results"' EXIT
last() { tail -n 1 | /usr/bin/python3 -c '
import json, sys
e = json.loads(sys.stdin.read())
print("%.1f %.2f %s" % (e["images_per_sec"], 1000 * e["allreduce_seconds"] / e["steps"], e["params_hash"][:16]))'; }
for i in $(seq "$pairs"); do
	r=$(DEVICES=1 THREADS=1 mpirun --oversubscribe -np 2 "$pipe" run "$file" --json | last)
	echo "mpirun-np2-1thread $r" | tee -a "$results"
	r=$(DEVICES=2 THREADS=2 "$pipe" run "$file" --json | last)
	echo "1proc-2replicas-2threads $r" | tee -a "$results"
	r=$(DEVICES=1 THREADS=2 "$pipe" run "$file" --json | last)
	echo "1proc-1replica-2threads $r" | tee -a "$results"
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, ips, ms, _ = line.split()
    runs.setdefault(name, []).append((float(ips), float(ms)))
med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()}
for k, (ips, ms) in med.items():
    print(f"median {k}: {ips:.1f} images/s, all-reduce {ms:.2f} ms a step")
m = med["mpirun-np2-1thread"][0]
for k in ("1proc-2replicas-2threads", "1proc-1replica-2threads"):
    print(f"mpirun -np 2 / {k}: {m / med[k][0]:.3f}")
PY
