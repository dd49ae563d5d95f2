"""The gradient oracle of docs/oracle.md, ported to Python (numpy).

Adapters make their gradients with it, so that an external system sees the
same bits as shardcheck's own runs: every micro-batch gradient is an integer
multiple of 2^-24 scaled by M, so every partial sum over micro-batches,
divided by M, is exact in fp32, and the global gradient is the same for
every DP size and reduction order. `systems/common/oracle_test.py` checks
this port byte for byte against the C++ oracle (`shardcheck oracle`),
zero mask included; change nothing here without changing the contract.

All arithmetic on keys is mod 2^64 (numpy uint64 wraps); gradients and
params are float32 arrays of the param's shape, row-major.
"""

import numpy as np

MASK64 = (1 << 64) - 1
INIT_MICRO_BATCH = 0xFFFFFFFF   # the `mb` of initial params
MASK_MICRO_BATCH = 0xFFFFFFFE   # the `mb` of the zero mask's key
MAX_MICRO_BATCHES = 32          # sums stay exact up to 32

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_TWO_POW_M24 = np.float32(2.0 ** -24)
_TWO_POW_M15 = np.float32(2.0 ** -15)


def splitmix64(x):
    """splitmix64 of one integer (a Python int in [0, 2^64))."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _splitmix64_array(x):
    """splitmix64 of every element of a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MUL1
        z = (z ^ (z >> np.uint64(27))) * _MUL2
        return z ^ (z >> np.uint64(31))


def key(seed, step, mb, pid):
    """key(seed, step, mb, pid) = splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ step) ^ mb) ^ pid)."""
    return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ step) ^ mb) ^ pid)


def _elements(shape):
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    return np.arange(n, dtype=np.uint64)


def draw(k, shape):
    """draw(k, e) for every flat element e of `shape`: int32 in [-16384, 16383]."""
    h = _splitmix64_array(_elements(shape) ^ np.uint64(k))
    return (((h >> np.uint64(40)) & np.uint64(0x7FFF)).astype(np.int32) - 16384).reshape(shape)


def masked(seed, step, pid, shape):
    """The zero mask: True where element e of param `pid` has gradient exactly 0 at `step`."""
    h = _splitmix64_array(_elements(shape) ^ np.uint64(key(seed, step, MASK_MICRO_BATCH, pid)))
    return ((h >> np.uint64(61)) == np.uint64(0)).reshape(shape)


def micro_batch_grad(seed, step, mb, pid, shape, micro_batches, zero_mask=False):
    """g[step][mb][pid] = float(draw * M) * 2^-24 (float32); +0 where masked."""
    d = draw(key(seed, step, mb, pid), shape)
    g = (d * np.int32(micro_batches)).astype(np.float32) * _TWO_POW_M24
    if zero_mask:
        g[masked(seed, step, pid, shape)] = np.float32(0.0)
    return g


def initial_param(seed, pid, shape):
    """p0[pid] = float(draw(key(seed, 0, 0xFFFFFFFF, pid), e)) * 2^-15 (float32; never masked).
    A bf16 model rounds it to bf16 (round to nearest even), e.g. torch's .to(torch.bfloat16)."""
    return draw(key(seed, 0, INIT_MICRO_BATCH, pid), shape).astype(np.float32) * _TWO_POW_M15


def partial_grad(seed, step, pid, shape, micro_batches, mb_begin, mb_end, zero_mask=False):
    """Micro-batches [mb_begin, mb_end) summed in float32 in increasing order, divided by M:
    what a DP rank contributes before the SUM reduction. [0, M) is the global gradient."""
    acc = np.zeros(shape, dtype=np.float32)
    for mb in range(mb_begin, mb_end):
        acc = acc + micro_batch_grad(seed, step, mb, pid, shape, micro_batches, zero_mask)
    return acc / np.float32(micro_batches)


def rank_micro_batches(rank, dp, micro_batches):
    """The micro-batches [begin, end) that rank `rank` of a DP group of `dp` owns."""
    if micro_batches % dp:
        raise ValueError(f"dp {dp} does not divide micro_batches {micro_batches}")
    per = micro_batches // dp
    return rank * per, (rank + 1) * per


def global_grad(seed, step, pid, shape, micro_batches, zero_mask=False):
    """G[step][pid]: the sum over all M micro-batches divided by M."""
    return partial_grad(seed, step, pid, shape, micro_batches, 0, micro_batches, zero_mask)
