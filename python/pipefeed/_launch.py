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


# Where a platform wheel carries pipe (_build.py's BIN).
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "pipe")


def find_pipe(pipe_bin):
    """The pipe command to start: pipe_bin, else $PIPE_BIN, else the pipe
    this package's wheel carries, else pipe on PATH. What is set by hand
    wins over what was installed, and the pipe installed with this package,
    built from the same checkout, over one that happens to be on PATH."""
    if pipe_bin:
        return pipe_bin
    if os.environ.get("PIPE_BIN"):
        return os.environ["PIPE_BIN"]
    if os.path.exists(BUNDLED):
        if not os.access(BUNDLED, os.X_OK):
            raise PermissionError(
                f"{BUNDLED}, the pipe command pipefeed was installed with, is not executable (was its wheel "
                "unpacked without file modes?): reinstall pipefeed with pip, or set PIPE_BIN"
            )
        return BUNDLED
    found = shutil.which("pipe")
    if found is None:
        raise FileNotFoundError(
            "pipefeed was installed without the pipe command, and pipe is not on PATH: install a pipefeed wheel "
            "that carries it (scripts/wheel, or pip install ./python with Go), put pipe on PATH "
            "(go install github.com/pipefeed/pipe/cmd/pipe@latest), or pass pipe_bin= or set PIPE_BIN"
        )
    return found
