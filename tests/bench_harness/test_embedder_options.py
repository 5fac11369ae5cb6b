"""`mneme bench retrieval` measures the embedder it is told to: the profile, the column's size
and a model file (pinned by the sha256 of the file given) reach the service's settings."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from benchmarks.cli import _settings, add_bench_commands


def parse(*arguments: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_commands(parser)
    return parser.parse_args(["retrieval", *arguments])


def test_the_embedding_options_reach_the_settings(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not really a model")
    # The settings look for the model's tokenizer beside it.
    (tmp_path / "tokenizer.json").write_text("{}")
    settings = _settings(
        parse(
            "--embedding-profile",
            "embeddinggemma-300m",
            "--embedding-dims",
            "256",
            "--embedding-model",
            str(model),
        )
    )
    assert settings.embedding_profile == "embeddinggemma-300m"
    assert settings.embedding_dims == 256
    assert settings.embedding_local_model_path == model
    assert settings.embedding_local_model_sha256 == hashlib.sha256(model.read_bytes()).hexdigest()


def test_without_options_the_settings_choose() -> None:
    settings = _settings(parse())
    assert settings.embedding_profile is None
    assert settings.embedding_local_model_path is None
