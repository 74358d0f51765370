"""The conftest hook marks every test parametrized with a CUDA device as ``cuda``."""

pytest_plugins = ["pytester"]


def test_cuda_parametrized_tests_get_the_marker(pytester):
    pytester.makeconftest(open(__file__.replace("testing/test_cuda_marker.py", "conftest.py")).read())
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.parametrize("device", [torch.device("cpu"), torch.device("cuda:0"), "cuda", "cpu"])
        def test_dev(device):
            pass
        """
    )
    result = pytester.runpytest("-m", "cuda", "--collect-only", "-q", "-p", "no:cacheprovider")
    lines = [line for line in result.outlines if "::" in line]
    assert lines == ["test_cuda_parametrized_tests_get_the_marker.py::test_dev[device1]",
                     "test_cuda_parametrized_tests_get_the_marker.py::test_dev[cuda]"]
