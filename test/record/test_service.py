"""ProcessLogger: a logger in its own process, used from the owner and from pickled clients."""
from __future__ import annotations

import multiprocessing as mp
import pickle

import pytest
import torch

from torchrl.record import CSVLogger, ProcessLogger
from torchrl.record.loggers import get_logger


def _worker_logs(client, rank: int) -> None:
    for i in range(3):
        client.log_scalar(f"worker{rank}", float(i), step=i)


def _csv(path):
    return path.read_text().splitlines()


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    logger = CSVLogger(
        "exp", log_dir=str(root), service_backend="process",
        service_backend_options={"context": "spawn", "startup_timeout": 120},
    )
    yield logger, root
    logger.shutdown()


class TestProcessLogger:
    def test_owner_logs_in_the_service(self, service):
        logger, root = service
        assert isinstance(logger, ProcessLogger) and not isinstance(logger, CSVLogger)
        assert logger.service_backend == "process" and logger.is_alive
        assert logger.exp_name == "exp" and logger.log_dir == str(root)
        assert logger.log_scalar("loss", 0.5, step=2) is None
        assert logger.log_metrics({"a": torch.tensor(1.0)}, step=3) == {"a": 1.0}
        logger.flush()
        assert _csv(root / "exp" / "scalars" / "loss.csv") == ["2,0.5"]
        assert logger.state_dict()["scalar_counts"]["loss"] == 1

    def test_clients_from_other_processes(self, service):
        logger, root = service
        client = logger.client()
        clone = pickle.loads(pickle.dumps(client))
        assert clone.exp_name == "exp"
        ctx = mp.get_context("fork")
        procs = [ctx.Process(target=_worker_logs, args=(client, r)) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        for r in range(2):
            assert _csv(root / "exp" / "scalars" / f"worker{r}.csv") == ["0,0.0", "1,1.0", "2,2.0"]

    def test_video_recorder_uses_a_client(self, service):
        from tensordict import TensorDict

        from torchrl.record import VideoRecorder
        from torchrl.record.loggers._service import _ProcessLoggerClient

        logger, root = service
        recorder = VideoRecorder(logger, tag="clip")
        assert type(recorder.logger) is _ProcessLoggerClient
        recorder(TensorDict(pixels=torch.full((3, 4, 4, 3), 7, dtype=torch.uint8), batch_size=[3]))
        recorder.dump(step=5)
        video = torch.load(root / "exp" / "videos" / "clip_5.pt")
        assert video.shape == (1, 3, 3, 4, 4) and int(video.float().mean()) == 7

    def test_errors_come_back(self, service):
        logger, _ = service
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]"):
            logger.log_video("v", torch.zeros(2, 3, 4, 4, dtype=torch.uint8), bogus=1)
        client = logger.client()
        with pytest.raises(AttributeError, match="clients forward log_\\* calls only"):
            client.flush()
        with pytest.raises(TypeError, match="cannot be pickled; send logger.client\\(\\) instead"):
            pickle.dumps(logger)

    def test_constructor_error_and_close(self, tmp_path):
        with pytest.raises(ValueError, match="video_format must be one of"):
            ProcessLogger(CSVLogger, "exp", log_dir=str(tmp_path), video_format="avi", mp_context="fork")
        logger = get_logger("csv", str(tmp_path), "exp2", service_backend="process",
                            service_backend_options={"mp_context": "fork"})
        client = logger.client()
        logger.close()
        assert not logger.is_alive
        with pytest.raises(RuntimeError, match="is not running"):
            client.log_scalar("x", 1.0)
        with pytest.raises(ValueError, match="max_queue_size must be >= 1"):
            ProcessLogger(CSVLogger, "exp", max_queue_size=0)


@pytest.fixture(scope="module")
def ray_service(tmp_path_factory):
    ray = pytest.importorskip("ray", reason="RayLogger tests need ray (pip install ray)")
    root = tmp_path_factory.mktemp("ray")
    logger = CSVLogger(
        "exp", log_dir=str(root), service_backend="ray",
        service_backend_options={
            "ray_init_config": {"num_cpus": 1, "include_dashboard": False, "log_to_driver": False},
            "actor_options": {"num_cpus": 0},
        },
    )
    yield logger, root
    logger.shutdown()
    ray.shutdown()


class TestRayLogger:
    def test_owner_and_clients(self, ray_service):
        from torchrl.record import RayLogger

        logger, root = ray_service
        assert isinstance(logger, RayLogger) and logger.service_backend == "ray" and logger.is_alive
        assert logger.exp_name == "exp"
        logger.log_scalar("loss", 0.5, step=1)
        client = pickle.loads(pickle.dumps(logger.client()))
        assert client.log_metrics({"a": {"b": torch.tensor(2.0)}}, step=4) == {"a/b": 2.0}
        logger.flush()
        assert _csv(root / "exp" / "scalars" / "loss.csv") == ["1,0.5"]
        assert _csv(root / "exp" / "scalars" / "a" / "b.csv") == ["4,2.0"]
        assert logger.state_dict()["scalar_counts"] == {"loss": 1, "a/b": 1}

    def test_errors(self, ray_service):
        logger, _ = ray_service
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]"):
            logger.log_video("v", torch.zeros(2, 3, 4, 4, dtype=torch.uint8), bogus=1)
        with pytest.raises(AttributeError, match="clients forward log_\\* calls only"):
            logger.client().close()
        with pytest.raises(TypeError, match="cannot be pickled; send logger.client\\(\\) instead"):
            pickle.dumps(logger)
        with pytest.raises(ValueError, match=r"unknown ray service option\(s\) \['num_gpus'\]"):
            CSVLogger("exp", service_backend="ray", service_backend_options={"num_gpus": 1})
