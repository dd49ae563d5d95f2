"""The Python oracle port (systems/common/oracle.py) against the C++ oracle, byte for byte.

Run by ctest (`systems.oracle_port`) with the systems' Python:
    .venv-torch/bin/python -m unittest systems/common/oracle_test.py
SHARDCHECK_BINARY names the shardcheck binary (default: build/shardcheck).
"""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import oracle  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("SHARDCHECK_BINARY", os.path.join(ROOT, "build", "shardcheck"))

# docs/oracle.md, "Known values".
KNOWN = [(1234, 1, 0, 0, 0, 0x2848592887fb0555, 16009),
         (1234, 1, 23, 5, 17, 0xeefee57dfc72bc2b, -2036),
         (7, 3, 11, 2, 1000, 0x16c19fee792c7e69, 3886),
         (0, 12, 5, 30, 4095, 0xe1a45efdc9814f2b, -12497),
         (1234, 0, 0xFFFFFFFF, 0, 0, 0x91f381b5922e556a, 5981)]
KNOWN_MASK = [(1234, 1, 0, 0x9d7fb601c4672767, [2, 4, 6, 10, 20, 27, 44, 47, 60], 12346),
              (1234, 2, 0, 0xa5467375e5f8f483, [9, 10, 14, 33, 35, 40, 41, 48, 51, 56], 12437),
              (7, 3, 2, 0x4a60b1468b23ebdb, [9, 40, 50, 60], 12476)]

# mixed-small (testing/model_spec.cc), in pid order.
MIXED_SMALL = [("emb", (96, 32)), ("pos", (16, 32)), ("qkv", (96, 32)), ("qkv_b", (96,)),
               ("proj", (32, 32)), ("proj_b", (32,)), ("tiny", (7,)), ("norm", (32,)),
               ("fc1", (128, 32)), ("fc1_b", (128,)), ("fc2", (32, 128)), ("fc2_b", (32,)),
               ("head", (96, 32))]


def dump(model, seed, steps, dp, micro_batches):
    """The C++ oracle's values for `model`, from `shardcheck oracle`."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "oracle.safetensors")
        subprocess.run([BINARY, "oracle", "--model", model, "--seed", str(seed), "--steps", str(steps),
                        "--dp", str(dp), "--micro-batches", str(micro_batches), "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        return load_file(out)


class KnownValues(unittest.TestCase):
    def test_splitmix64(self):
        self.assertEqual(oracle.splitmix64(0), 0xE220A8397B1DCDAF)
        self.assertEqual(oracle.splitmix64(1), 0x910A2DEC89025CC1)

    def test_keys_and_draws(self):
        for seed, step, mb, pid, e, key, draw in KNOWN:
            k = oracle.key(seed, step, mb, pid)
            self.assertEqual(k, key)
            self.assertEqual(int(oracle.draw(k, (e + 1,))[e]), draw)

    def test_zero_mask(self):
        for seed, step, pid, key, first, count in KNOWN_MASK:
            self.assertEqual(oracle.key(seed, step, oracle.MASK_MICRO_BATCH, pid), key)
            m = oracle.masked(seed, step, pid, (100000,))
            self.assertEqual(list(np.nonzero(m[:64])[0]), first)
            self.assertEqual(int(m.sum()), count)


class AgainstCpp(unittest.TestCase):
    """Every byte of p0 and of every rank's partial gradient, as the C++ oracle writes them."""

    def check(self, model, zero_mask, seed, steps, dp, micro_batches):
        cpp = dump(model, seed, steps, dp, micro_batches)
        for pid, (name, shape) in enumerate(MIXED_SMALL):
            want = cpp[f"p0.{name}"]
            got = oracle.initial_param(seed, pid, shape)
            self.assertEqual(got.dtype, np.float32)
            self.assertEqual(got.tobytes(), want.tobytes(), f"p0.{name}")
            for step in range(1, steps + 1):
                total = np.zeros(shape, dtype=np.float32)
                for rank in range(dp):
                    b, e = oracle.rank_micro_batches(rank, dp, micro_batches)
                    got = oracle.partial_grad(seed, step, pid, shape, micro_batches, b, e, zero_mask)
                    key = f"grad.{step}.{rank}.{name}"
                    self.assertEqual(got.tobytes(), cpp[key].tobytes(), f"{model} {key}")
                    total = total + got
                # Exact sums: any DP size reduces to the same global gradient.
                glob = oracle.global_grad(seed, step, pid, shape, micro_batches, zero_mask)
                self.assertEqual(total.tobytes(), glob.tobytes(), f"{model} global {step} {name} dp {dp}")

    def test_mixed_small(self):
        for dp in (1, 2, 3):
            self.check("mixed-small", False, 1, 2, dp, 24)

    def test_sparse_mixed_small(self):
        for dp in (1, 3):
            self.check("sparse-mixed-small", True, 7, 2, dp, 24)
        cpp = dump("sparse-mixed-small", 7, 1, 1, 24)
        zeros = sum(int((v == 0).sum()) for k, v in cpp.items() if k.startswith("grad."))
        self.assertGreater(zeros, 0, "the zero mask zeroed nothing")

    def test_other_micro_batches(self):
        self.check("mixed-small", False, 1234, 1, 4, 32)

    def test_sums_are_exact_in_any_order(self):
        shape = (96, 32)
        parts = [oracle.micro_batch_grad(5, 3, mb, 2, shape, 24) for mb in range(24)]
        forward = np.zeros(shape, np.float32)
        for g in parts:
            forward = forward + g
        backward = np.zeros(shape, np.float32)
        for g in reversed(parts):
            backward = backward + g
        self.assertEqual(forward.tobytes(), backward.tobytes())


if __name__ == "__main__":
    unittest.main()
