"""Stub torch for the ncclguard Python hook tests (see ../README.md). Not PyTorch."""

__version__ = "0.0.0+stub"
_fake_events = []


class device(object):
    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif ":" in str(type):
            type, idx = str(type).split(":", 1)
            index = int(idx)
        self.type = str(type)
        self.index = index

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return "device(type=%r, index=%r)" % (self.type, self.index)


_next_ptr = [0x7f0000000000]


class Tensor(object):
    def __init__(self, n, value, dev):
        self.device = device(dev) if not isinstance(dev, device) else dev
        self.values = [float(value)] * n
        self.nbytes = 4 * n
        self._ptr = _next_ptr[0]
        _next_ptr[0] += 0x200000

    def data_ptr(self):
        return self._ptr

    def numel(self):
        return len(self.values)

    def item(self):
        assert len(self.values) == 1
        return self.values[0]


def ones(n, device=None):
    return Tensor(n, 1, device or "cpu")


def zeros(n, device=None):
    return Tensor(n, 0, device or "cpu")


def empty(n, device=None):
    return Tensor(n, 0, device or "cpu")


from . import cuda  # noqa: E402
from . import _C  # noqa: E402
from . import distributed  # noqa: E402  (real torch imports torch.distributed too)
