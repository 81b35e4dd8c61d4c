"""Data parallelism across the processes of a run launched on several GPUs
(launch.py): each process takes its share of every batch, their gradients
are summed before each optimizer step (each process's loss is weighted by
its share, so the sum is the batch's mean), and a stop request seen by any
of them stops all of them at the same step. In a run of one process every
function here changes nothing.

Needs torch alone.
"""

import torch

from .errors import Cancelled


def _group():
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def distributed():
    """True in one of several processes of a run."""
    return _group()


def world():
    """(rank, number of processes) of this process."""
    if not _group():
        return 0, 1
    return torch.distributed.get_rank(), torch.distributed.get_world_size()


def share(batch):
    """This process's share of a batch: every rank-th example, from its own."""
    rank, size = world()
    return batch if size == 1 else batch[rank::size]


def sum_gradients(params):
    """Sum the gradients of `params` over the processes (a process with no
    examples in a step adds zeros)."""
    if not _group():
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        torch.distributed.all_reduce(p.grad, op=torch.distributed.ReduceOp.SUM)


def check_stop(stop):
    """Raise Cancelled in every process once any of them was asked to stop."""
    if not _group():
        stop.check()
        return
    flag = torch.tensor([1.0 if stop.requested else 0.0], device=_device())
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    if flag.item() > 0:
        raise Cancelled()


def _device():
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
