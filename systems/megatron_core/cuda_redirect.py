"""Every CUDA use of megatron-core redirected to the CPU, in this one file (docs/systems.md,
"megatron-core: the CUDA redirection").

megatron-core assumes a GPU: it allocates its buffers on `torch.cuda.current_device()`, makes
streams and events, creates small tensors with `device='cuda'`, and checks that its params are
`torch.cuda.*Tensor`s. On a CPU machine over Gloo the adapter installs these redirections before
it builds anything, and nothing else of megatron is patched:

    current_device     torch.cuda.current_device() -> 'cpu'
    stream             torch.cuda.current_stream / Stream / stream / Event -> no-op stand-ins
    synchronize        torch.cuda.synchronize / empty_cache -> no-ops
    device_cuda        torch.<factory>(..., device='cuda' | 'cuda:N' | cuda device) -> 'cpu'
    tensor_cuda        Tensor.cuda() / Tensor.to('cuda') -> the CPU tensor
    type_name          Tensor.type() -> 'torch.cuda.FloatTensor' (and Half, BFloat16...)
    is_cuda            Tensor.is_cuda -> True

Each redirection applies only where the caller's frame is in megatron's source; any other caller
(torch itself, the adapter) gets torch's own behaviour. Every redirected call is counted by its
megatron call site (file:line, relative to the package root), so the cell's log and result say
exactly what ran differently from a GPU. On a GPU the adapter installs none of this.
"""

import collections
import functools
import os
import sys

import torch

_FACTORIES = ("tensor", "zeros", "ones", "empty", "full", "arange", "zeros_like", "ones_like",
              "empty_like", "full_like", "rand", "randn", "as_tensor")


class _NoStream:
    """A CUDA stream, event or stream context that does nothing (the CPU runs in order)."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name):
        return lambda *a, **k: None


class Redirection:
    """Installs the redirections and counts them by megatron call site."""

    def __init__(self, marker="/megatron/"):
        self.marker = marker
        self.here = os.path.abspath(__file__)
        self.counts = collections.Counter()   # (kind, "megatron/core/x.py:123") -> calls
        self.installed = False

    # --- where a call comes from -----------------------------------------------

    def _site(self, depth=2):
        """The megatron call site of the redirected call, or None for any other caller."""
        f = sys._getframe(depth)
        while f is not None and os.path.abspath(f.f_code.co_filename) == self.here:
            f = f.f_back
        if f is None:
            return None
        path = f.f_code.co_filename.replace(os.sep, "/")
        i = path.rfind(self.marker)
        if i < 0:
            return None
        return f"{path[i + 1:]}:{f.f_lineno}"

    def _count(self, kind, site):
        self.counts[(kind, site)] += 1

    # --- the redirections --------------------------------------------------------

    def install(self):
        if self.installed:
            return
        self.installed = True
        self._cuda_functions()
        self._factories()
        self._tensor_methods()

    def _cuda_functions(self):
        red = self
        cuda = torch.cuda

        def wrap(name, kind, replacement):
            original = getattr(cuda, name)

            @functools.wraps(original)
            def f(*args, **kwargs):
                site = red._site()
                if site is None:
                    return original(*args, **kwargs)
                red._count(kind, site)
                return replacement(*args, **kwargs)
            setattr(cuda, name, f)

        wrap("current_device", "current_device", lambda *a, **k: "cpu")
        for name in ("current_stream", "default_stream", "Stream", "stream", "Event"):
            wrap(name, "stream", _NoStream)
        for name in ("synchronize", "empty_cache"):
            wrap(name, "synchronize", lambda *a, **k: None)

    @staticmethod
    def _is_cuda_device(device):
        if isinstance(device, torch.device):
            return device.type == "cuda"
        if isinstance(device, str):
            return device.startswith("cuda")
        return False

    def _factories(self):
        red = self
        for name in _FACTORIES:
            original = getattr(torch, name)

            def make(original):
                @functools.wraps(original)
                def f(*args, **kwargs):
                    if red._is_cuda_device(kwargs.get("device")):
                        site = red._site()
                        if site is not None:
                            red._count("device_cuda", site)
                            kwargs["device"] = "cpu"
                    return original(*args, **kwargs)
                return f
            setattr(torch, name, make(original))

    def _tensor_methods(self):
        red = self
        cls = torch.Tensor
        original_cuda, original_to, original_type = cls.cuda, cls.to, cls.type
        original_is_cuda = cls.is_cuda

        def cuda(self, *args, **kwargs):
            site = red._site()
            if site is None:
                return original_cuda(self, *args, **kwargs)
            red._count("tensor_cuda", site)
            return self

        def to(self, *args, **kwargs):
            device = kwargs.get("device", args[0] if args else None)
            if red._is_cuda_device(device):
                site = red._site()
                if site is not None:
                    red._count("tensor_cuda", site)
                    if "device" in kwargs:
                        kwargs["device"] = "cpu"
                    else:
                        args = ("cpu",) + tuple(args[1:])
            return original_to(self, *args, **kwargs)

        def type_(self, dtype=None, non_blocking=False, **kwargs):
            if dtype is None:
                name = original_type(self)
                site = red._site()
                if site is not None and name.startswith("torch.") and not name.startswith("torch.cuda."):
                    red._count("type_name", site)
                    return "torch.cuda." + name[len("torch."):]
                return name
            return original_type(self, dtype, non_blocking, **kwargs)

        def is_cuda(self):
            site = red._site()
            if site is None:
                return original_is_cuda.__get__(self)
            red._count("is_cuda", site)
            return True

        cls.cuda, cls.to, cls.type = cuda, to, type_
        cls.is_cuda = property(is_cuda)

    # --- the record --------------------------------------------------------------

    def sites(self):
        """[{kind, site, calls}], sorted by kind and site: what the cell's result lists."""
        return [{"kind": k, "site": s, "calls": n} for (k, s), n in sorted(self.counts.items())]
