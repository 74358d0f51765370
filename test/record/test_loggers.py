"""Loggers, each read back from what it wrote: CSV files, TensorBoard events, W&B offline runs, MLflow stores."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from torchrl.record import CSVLogger, MLFlowLogger, TensorboardLogger, WandbLogger
from torchrl.record.loggers import generate_exp_name, get_logger, Logger
from torchrl.record.loggers._video import encode_gif, has_mp4_backend, tile, to_thwc, write_video
from torchrl.record.loggers.common import flatten_metrics


def _video(t=4, c=3, h=6, w=8, n=None):
    """Frame ``i`` is uniformly ``20 * i`` (uint8)."""
    v = (torch.arange(t, dtype=torch.uint8) * 20).view(t, 1, 1, 1).expand(t, c, h, w).clone()
    return v if n is None else v.expand(n, t, c, h, w).clone()


def _read_mp4(path) -> np.ndarray:
    av = pytest.importorskip("av")
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


# -- import hygiene -------------------------------------------------------------------------------------------------
_OPTIONAL = {"tensorboard", "wandb", "mlflow", "torchvision", "moviepy", "av", "PIL", "matplotlib", "omegaconf", "ray"}


def test_optional_backends_imported_only_inside_functions():
    """Module-level imports of torchrl.record never touch an optional library (they would load at import)."""
    import ast

    import torchrl.record

    offenders = []
    for path in Path(torchrl.record.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        local = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in local:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                guarded = any(isinstance(p, ast.If) and "TYPE_CHECKING" in ast.dump(p.test) and node in ast.walk(p)
                              for p in ast.walk(tree))
                if not guarded and any(n.split(".")[0] in _OPTIONAL or n.startswith("torch.utils.tensorboard")
                                       for n in names):
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


# -- video helpers --------------------------------------------------------------------------------------------------
class TestVideoHelpers:
    def test_tile_layout(self):
        frames = torch.stack([torch.full((1, 2, 2), i, dtype=torch.uint8) for i in range(1, 4)])
        grid = tile(frames)
        assert grid.shape == (1, 4, 4)
        assert grid[0, ::2, ::2].tolist() == [[1, 2], [3, 0]]

    def test_to_thwc_tiles_and_converts(self):
        out = to_thwc(_video(n=4).float() / 255)
        assert out.shape == (4, 12, 16, 3) and out.dtype == torch.uint8
        assert out[2, 0, 0].tolist() == [40, 40, 40]

    def test_to_thwc_rejects_channels_last(self):
        with pytest.raises(ValueError, match=r"permute channels-last"):
            to_thwc(torch.zeros(2, 6, 8, 3, dtype=torch.uint8))
        with pytest.raises(ValueError, match=r"\(T, C, H, W\) or \(N, T, C, H, W\)"):
            to_thwc(torch.zeros(6, 8, 3))

    def test_gif_round_trip(self):
        from PIL import Image, ImageSequence

        gif = Image.open(__import__("io").BytesIO(encode_gif(to_thwc(_video()), fps=10)))
        frames = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)]
        assert len(frames) == 4 and frames[3].shape == (6, 8, 3)
        assert int(frames[3][0, 0, 0]) == 60

    @pytest.mark.skipif(not has_mp4_backend(), reason="mp4 needs PyAV (pip install av)")
    def test_mp4_round_trip_odd_size_and_grey(self, tmp_path):
        video = _video(t=5, c=1, h=7, w=9)
        write_video(tmp_path / "v.mp4", video, fps=10)
        frames = _read_mp4(tmp_path / "v.mp4")
        assert frames.shape == (5, 8, 10, 3)
        assert abs(int(frames[4, 3, 3, 0]) - 80) <= 3

    def test_unknown_extension(self, tmp_path):
        with pytest.raises(ValueError, match=r"unsupported video file extension '.avi'"):
            write_video(tmp_path / "v.avi", _video(), fps=4)


# -- Logger base ----------------------------------------------------------------------------------------------------
class TestLoggerBase:
    def test_abstract(self):
        with pytest.raises(TypeError, match="abstract"):
            Logger("x", "y")

    def test_flatten_metrics(self):
        td = TensorDict({"a": torch.tensor(1.5), "b": {"c": torch.tensor([2])}}, [])
        assert flatten_metrics(td) == {"a": 1.5, "b/c": 2}
        assert flatten_metrics({"a": {"b": 1}, "c": torch.tensor(0.5)}, keys_sep=".") == {"a.b": 1, "c": 0.5}
        with pytest.raises(ValueError, match=r"metric 'x' has shape \(3,\)"):
            flatten_metrics({"x": torch.zeros(3)})

    def test_backend_errors(self, tmp_path):
        with pytest.raises(ValueError, match=r"service_backend must be one of \['direct', 'process', 'ray'\]"):
            CSVLogger("e", log_dir=tmp_path, service_backend="thread")
        with pytest.raises(ValueError, match=r"only apply to the 'process' and 'ray' backends"):
            CSVLogger("e", log_dir=tmp_path, service_backend_options={"max_queue_size": 3})
        with pytest.raises(ValueError, match=r"unknown process service option\(s\) \['bogus'\]"):
            CSVLogger("e", log_dir=tmp_path, service_backend="process", service_backend_options={"bogus": 1})
        with pytest.warns(DeprecationWarning, match="use_ray_service=True is deprecated"):
            with pytest.raises(ValueError, match=r"use_ray_service=True conflicts with service_backend='process'"):
                CSVLogger("e", log_dir=tmp_path, use_ray_service=True, service_backend="process")

    def test_direct_lifecycle(self, tmp_path):
        logger = CSVLogger("e", log_dir=tmp_path)
        assert logger.client() is logger and logger.start() is logger
        assert logger.service_backend == "direct" and logger.is_alive
        logger.shutdown()
        assert not logger.is_alive
        logger.close()  # idempotent


# -- CSV ------------------------------------------------------------------------------------------------------------
class TestCSVLogger:
    def test_scalars_layout_and_values(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        for i in range(3):
            logger.log_scalar("loss", 1.0 / (i + 1), step=10 * i)
        logger.log_scalar("train/reward", 2.0)
        logger.log_scalar("train/reward", 3.0)
        lines = (tmp_path / "exp" / "scalars" / "loss.csv").read_text().splitlines()
        assert [tuple(map(float, line.split(","))) for line in lines] == [(0, 1.0), (10, 0.5), (20, 1 / 3)]
        assert (tmp_path / "exp" / "scalars" / "train" / "reward.csv").read_text() == "0,2.0\n1,3.0\n"
        assert logger.experiment.log_dir == str(tmp_path / "exp")

    def test_default_log_dir(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        logger = CSVLogger("exp")
        assert logger.log_dir == os.path.join(str(tmp_path), "csv_logs")
        assert (tmp_path / "csv_logs" / "exp" / "scalars").is_dir()

    def test_log_metrics_returns_flat(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        out = logger.log_metrics(TensorDict({"a": torch.tensor(0.25), "n": {"b": torch.tensor(3)}}, []), step=7)
        assert out == {"a": 0.25, "n/b": 3}
        assert (tmp_path / "exp" / "scalars" / "n" / "b.csv").read_text() == "7,3.0\n"

    @pytest.mark.parametrize("fmt", ["pt", "memmap"])
    def test_video_tensor_formats(self, tmp_path, fmt):
        logger = CSVLogger("exp", log_dir=tmp_path, video_format=fmt)
        video = _video(n=1)
        logger.log_video("eval", video)
        logger.log_video("eval", video, step=9)
        videos = tmp_path / "exp" / "videos"
        assert sorted(p.name for p in videos.iterdir()) == [f"eval_0.{fmt}", f"eval_9.{fmt}"]
        if fmt == "pt":
            torch.testing.assert_close(torch.load(videos / "eval_9.pt"), video)
        else:
            from tensordict import MemoryMappedTensor

            loaded = MemoryMappedTensor.from_filename(videos / "eval_9.memmap", dtype=torch.uint8, shape=video.shape)
            torch.testing.assert_close(torch.as_tensor(loaded), video)

    @pytest.mark.skipif(not has_mp4_backend(), reason="mp4 needs PyAV (pip install av)")
    def test_video_mp4(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4", video_fps=12)
        logger.log_video("eval", _video(t=6, n=1), step=1)
        frames = _read_mp4(tmp_path / "exp" / "videos" / "eval_1.mp4")
        assert frames.shape == (6, 6, 8, 3)
        assert [abs(int(frames[i, 2, 2, 0]) - 20 * i) <= 3 for i in range(6)] == [True] * 6

    def test_video_format_checked(self, tmp_path):
        with pytest.raises(ValueError, match=r"video_format must be one of \['pt', 'memmap', 'mp4'\], got 'avi'"):
            CSVLogger("exp", log_dir=tmp_path, video_format="avi")
        logger = CSVLogger("exp", log_dir=tmp_path)
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]"):
            logger.log_video("v", _video(), bogus=1)

    def test_hparams_and_histogram(self, tmp_path):
        @dataclasses.dataclass
        class Cfg:
            lr: float = 0.1
            net: dict = dataclasses.field(default_factory=lambda: {"depth": 2})

        logger = CSVLogger("exp", log_dir=tmp_path)
        logger.log_hparams(Cfg())
        assert (tmp_path / "exp" / "texts" / "hparams.txt").read_text() == "lr: 0.1\nnet/depth: 2\n"
        logger.log_histogram("w", torch.arange(5.0), step=3)
        torch.testing.assert_close(torch.load(tmp_path / "exp" / "histograms" / "w_3.pt"), torch.arange(5.0))
        with pytest.raises(TypeError, match="expected a dict, an OmegaConf config"):
            logger.log_hparams([1, 2])

    def test_print_log_dir(self, tmp_path, capsys):
        CSVLogger("exp", log_dir=tmp_path).print_log_dir()
        assert str(tmp_path / "exp") in capsys.readouterr().out

    def test_state_dict_resumes_counters(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        logger.log_scalar("x", 1.0)
        logger.log_video("v", _video())
        state = logger.state_dict()
        assert state["logger_type"] == "CSVLogger" and state["scalar_counts"] == {"x": 1}
        logger.close()
        resumed = get_logger("csv", "ignored", "ignored", state_dict=state)
        resumed.log_scalar("x", 2.0)
        resumed.log_video("v", _video())
        assert (tmp_path / "exp" / "scalars" / "x.csv").read_text() == "0,1.0\n1,2.0\n"
        assert (tmp_path / "exp" / "videos" / "v_1.pt").exists() or (tmp_path / "exp" / "videos" / "v_1.mp4").exists()
        with pytest.raises(ValueError, match="the state was saved by a CSVLogger"):
            TensorboardLogger.load_state_dict(object.__new__(TensorboardLogger), state)


# -- utils ----------------------------------------------------------------------------------------------------------
class TestUtils:
    def test_generate_exp_name(self):
        a, b = generate_exp_name("SAC", "cheetah"), generate_exp_name("SAC", "cheetah")
        assert a != b
        parts = a.split("_")
        assert parts[:2] == ["SAC", "cheetah"] and len(parts[2]) == 8
        assert len(a.split("_", 3)[3]) == len("24_01_31-12_00_00")

    def test_get_logger_csv_and_none(self, tmp_path):
        logger = get_logger("csv", str(tmp_path), "exp")
        assert isinstance(logger, CSVLogger) and logger.exp_name == "exp" and logger.log_dir == str(tmp_path)
        assert logger.video_format == ("mp4" if has_mp4_backend() else "pt")
        assert get_logger("", "x", "y") is None and get_logger(None, "x", "y") is None

    def test_get_logger_errors(self, tmp_path):
        with pytest.raises(NotImplementedError, match=r"unsupported logger_type 'neptune'"):
            get_logger("neptune", str(tmp_path), "exp")
        with pytest.raises(ValueError, match=r"not supported for logger_type 'mlflow'"):
            get_logger("mlflow", str(tmp_path), "exp", state_dict={"logger_type": "MLFlowLogger"})
        with pytest.raises(ValueError, match=r"saved by a CSVLogger, not a TensorboardLogger"):
            get_logger("tensorboard", str(tmp_path), "exp", state_dict={"logger_type": "CSVLogger"})
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['foo'\]"):
            get_logger("csv", str(tmp_path), "exp", foo=1)


# -- TensorBoard ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def event_accumulator():
    pytest.importorskip("tensorboard", reason="TensorboardLogger tests need tensorboard (pip install tensorboard)")
    from tensorboard.backend.event_processing import event_accumulator

    return event_accumulator


def _events(ea_mod, path):
    ea = ea_mod.EventAccumulator(str(path), size_guidance={"images": 0, "scalars": 0, "histograms": 0})
    ea.Reload()
    return ea


class TestTensorboardLogger:
    def test_read_back_everything(self, tmp_path, event_accumulator):
        from PIL import Image, ImageSequence
        from tensorboard.plugins.hparams import plugin_data_pb2

        logger = get_logger("tensorboard", str(tmp_path), "exp")
        assert isinstance(logger, TensorboardLogger)
        for i in range(3):
            logger.log_scalar("loss", 0.5 * i, step=i)
        logger.log_metrics({"a": {"b": torch.tensor(2.0)}}, step=5)
        logger.log_video("vid", _video(n=2), step=4, fps=8)
        logger.log_histogram("w", torch.arange(10.0), step=1)
        logger.log_hparams({"lr": 0.1, "opt": {"name": "adam"}, "layers": [64, 64]})
        logger.close()
        ea = _events(event_accumulator, tmp_path / "exp")
        assert [(e.step, e.value) for e in ea.Scalars("loss")] == [(0, 0.0), (1, 0.5), (2, 1.0)]
        assert [(e.step, e.value) for e in ea.Scalars("a/b")] == [(5, 2.0)]
        (image,) = ea.Images("vid")
        assert image.step == 4 and (image.width, image.height) == (16, 6)  # two videos tiled side by side
        gif = Image.open(__import__("io").BytesIO(image.encoded_image_string))
        frames = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)]
        assert len(frames) == 4 and int(frames[2][0, 12, 0]) == 40
        (hist,) = ea.Histograms("w")
        assert hist.step == 1 and hist.histogram_value.num == 10 and hist.histogram_value.max == 9.0
        content = ea.PluginTagToContent("hparams")
        data = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
        hp = data.session_start_info.hparams
        assert hp["lr"].number_value == 0.1 and hp["opt/name"].string_value == "adam"
        assert hp["layers"].string_value == "[64, 64]"

    def test_state_dict(self, tmp_path, event_accumulator):
        logger = TensorboardLogger("exp", log_dir=str(tmp_path))
        logger.log_video("v", _video())
        state = logger.state_dict()
        logger.close()
        assert state == {"logger_type": "TensorboardLogger", "exp_name": "exp", "log_dir": str(tmp_path),
                         "video_counts": {"v": 1}, "video_fps": 30}
        resumed = get_logger("tensorboard", "elsewhere", "other", state_dict=state)
        resumed.log_video("v", _video())
        resumed.close()
        steps = sorted(img.step for run in (tmp_path / "exp").iterdir()
                       for img in _events(event_accumulator, run).Images("v"))
        assert steps == [0, 1]


# -- W&B (offline) --------------------------------------------------------------------------------------------------
def _wandb_records(run_dir: Path) -> list:
    """Decodes the records of an offline ``run-*.wandb`` file (a LevelDB-style log of protobufs)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = glob.glob(str(run_dir / "run-*.wandb"))
    data = Path(path).read_bytes()
    block, pos, chunks, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        payload, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:
            chunks.append(payload)
        elif kind == 2:
            pending = payload
        elif kind == 3:
            pending += payload
        elif kind == 4:
            chunks.append(pending + payload)
    records = []
    for chunk in chunks:
        record = pb.Record()
        record.ParseFromString(chunk)
        records.append(record)
    return records


def _history(records) -> list[dict]:
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            rows.append({"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in r.history.item})
    return rows


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory):
    pytest.importorskip("wandb", reason="WandbLogger tests need wandb (pip install wandb)")
    root = tmp_path_factory.mktemp("wandb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_SILENT", "true")
        return _run_wandb(root)


def _run_wandb(root: Path) -> dict:
    logger = get_logger("wandb", str(root), "exp", wandb_kwargs={"offline": True, "project": "torchrl-test"})
    assert isinstance(logger, WandbLogger)
    logger.log_scalar("loss", 0.5, step=3)
    logger.log_scalar("raw", 1.5, step=7, override_global_step=True)
    logger.log_metrics(TensorDict({"m": {"x": torch.tensor(2.0)}}, []), step=4)
    logger.log_str("note", "hello", step=8)
    logger.log_video("vid", _video(), step=9, fps=5, format="gif")
    logger.log_histogram("h", torch.arange(6.0), step=10, bins=3)
    logger.log_hparams({"lr": 0.01, "net": {"depth": 3}})
    state = logger.state_dict()
    logger.close()
    (run_dir,) = [Path(p) for p in glob.glob(str(root / "wandb" / "offline-run-*"))]
    deadline = time.monotonic() + 30
    while True:  # wandb-core may still be writing the run file when finish() returns
        records = _wandb_records(run_dir)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return {"records": records, "run_dir": run_dir, "state": state}


class TestWandbLogger:
    def test_history(self, wandb_run):
        rows = _history(wandb_run["records"])
        assert {"loss": 0.5, "trainer/step": 3}.items() <= rows[0].items()
        raw = next(r for r in rows if "raw" in r)
        assert raw["_step"] == 7 and "trainer/step" not in raw
        metrics = next(r for r in rows if "m/x" in r)
        assert metrics["m/x"] == 2.0 and metrics["trainer/step"] == 4
        assert next(r for r in rows if "note" in r)["note"] == "hello"
        video = next(r for r in rows if "vid/_type" in r)
        assert video["vid/_type"] == "video-file" and video["trainer/step"] == 9
        assert (wandb_run["run_dir"] / "files" / video["vid/path"]).is_file()
        hist = next(r for r in rows if "h/_type" in r)
        assert hist["h/_type"] == "histogram" and sum(hist["h/values"]) == 6 and len(hist["h/values"]) == 3

    def test_config_and_state(self, wandb_run):
        config = {}
        for r in wandb_run["records"]:
            kind = r.WhichOneof("record_type")
            updates = r.run.config.update if kind == "run" else r.config.update if kind == "config" else []
            for item in updates:
                config[item.key] = json.loads(item.value_json)
        assert config["lr"] == 0.01 and config["net"] == {"depth": 3}
        assert config["env"]["python"] == sys.version.split()[0] and "torch" in config["env"]["packages"]
        state = wandb_run["state"]
        assert state["logger_type"] == "WandbLogger" and state["offline"] is True and len(state["id"]) > 0

    def test_save_dir_and_log_dir_exclusive(self, tmp_path):
        pytest.importorskip("wandb")
        with pytest.raises(ValueError, match="save_dir and log_dir are the same option"):
            WandbLogger("exp", offline=True, save_dir=str(tmp_path), log_dir=str(tmp_path))


# -- MLflow (local file store) --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlflow_run(tmp_path_factory):
    pytest.importorskip("mlflow", reason="MLFlowLogger tests need mlflow (pip install mlflow-skinny)")
    from mlflow.tracking import MlflowClient

    old = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # recent MLflow keeps the file store behind this flag
    try:
        root = tmp_path_factory.mktemp("mlflow")
        logger = get_logger("mlflow", str(root / "mlruns"), "exp")
        assert isinstance(logger, MLFlowLogger)
        for i in range(3):
            logger.log_scalar("loss", 1.0 - 0.25 * i, step=i)
        logger.log_metrics({"a": {"b": torch.tensor(4.0)}}, step=2)
        logger.log_hparams({"lr": 0.1, "net": {"depth": 2}})
        logger.log_video("eval/vid", _video(), step=3, format="gif")
        logger.log_histogram("w", torch.arange(4.0), step=1, bins=2)
        logger.close()
        client = MlflowClient(logger.tracking_uri)
        yield logger, client
    finally:
        if old is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = old


class TestMLFlowLogger:
    def test_metrics_params_status(self, mlflow_run):
        logger, client = mlflow_run
        history = client.get_metric_history(logger.run_id, "loss")
        assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 0.75), (2, 0.5)]
        assert [(m.step, m.value) for m in client.get_metric_history(logger.run_id, "a/b")] == [(2, 4.0)]
        run = client.get_run(logger.run_id)
        assert run.data.params == {"lr": "0.1", "net/depth": "2"}
        assert run.info.status == "FINISHED" and run.info.run_name == "exp"
        assert client.get_experiment(run.info.experiment_id).name == "exp"

    def test_artifacts(self, mlflow_run, tmp_path):
        from PIL import Image

        logger, client = mlflow_run
        assert [a.path for a in client.list_artifacts(logger.run_id, "videos")] == ["videos/eval_vid_3.gif"]
        local = client.download_artifacts(logger.run_id, "videos/eval_vid_3.gif", str(tmp_path))
        assert Image.open(local).n_frames == 4
        local = client.download_artifacts(logger.run_id, "histograms/w_1.json", str(tmp_path))
        hist = json.loads(Path(local).read_text())
        assert hist == {"step": 1, "edges": [0.0, 1.5, 3.0], "counts": [2.0, 2.0]}

    def test_state_dict(self, mlflow_run):
        logger, _ = mlflow_run
        state = logger.state_dict()
        assert state["run_id"] == logger.run_id and state["video_counts"] == {"eval/vid": 1}


class TestAvailabilityFlags:
    """TorchRL's ``_has_<library>`` names, found with ``importlib.util.find_spec`` (nothing imported)."""

    def test_flags(self):
        import importlib.util

        from torchrl.record.loggers import common, mlflow, tensorboard, wandb

        def installed(name):
            return importlib.util.find_spec(name) is not None

        expected = {
            (tensorboard, "_has_tb"): "tensorboard", (tensorboard, "_has_omgaconf"): "omegaconf",
            (mlflow, "_has_mlflow"): "mlflow", (mlflow, "_has_omegaconf"): "omegaconf",
            (mlflow, "_has_torchcodec"): "torchcodec", (wandb, "_has_wandb"): "wandb",
            (wandb, "_has_omegaconf"): "omegaconf", (wandb, "_has_moviepy"): "moviepy",
            (common, "_has_tv"): "torchvision", (common, "_has_torchcodec"): "torchcodec",
        }
        for (module, flag), lib in expected.items():
            assert getattr(module, flag) is installed(lib), (module.__name__, flag)

    def test_flags_do_not_import_the_libraries(self):
        import subprocess

        code = (
            "import sys, torchrl.record.loggers.wandb, torchrl.record.loggers.mlflow, torchrl.envs.libs.gym\n"
            "print(sorted(m for m in ('wandb', 'mlflow', 'gymnasium') if m in sys.modules))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip().splitlines()[-1] == "[]"
