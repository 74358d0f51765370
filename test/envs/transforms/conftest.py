"""Fixtures shared by the transform tests."""
import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for the module: convolutions on tiny images (the pretrained encoders) gain nothing
    from more threads than free cores, and only spin-wait on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
