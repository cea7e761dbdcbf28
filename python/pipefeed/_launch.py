"""Starting pipe: where the command is, the rank a launcher gave, whether a
process is stopped."""

import os
import shutil

# Launchers and the environment variables that carry a process's rank and
# the number of ranks, in the order they are tried.
LAUNCHERS = [
    ("RANK", "WORLD_SIZE"),  # torchrun, torch.distributed
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI
    ("PMI_RANK", "PMI_SIZE"),  # MPICH, Intel MPI
    ("SLURM_PROCID", "SLURM_NTASKS"),  # Slurm srun
]


def launcher_rank():
    for r, w in LAUNCHERS:
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    return None, None


def stopped(pid):
    """Whether process pid is stopped (by a signal, or traced)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def find_pipe(pipe_bin):
    if pipe_bin:
        return pipe_bin
    if os.environ.get("PIPE_BIN"):
        return os.environ["PIPE_BIN"]
    found = shutil.which("pipe")
    if found is None:
        raise FileNotFoundError(
            "the pipe command is not on PATH: install it (go install github.com/pipefeed/pipe/cmd/pipe@latest), "
            "or pass pipe_bin= or set PIPE_BIN"
        )
    return found
