"""Models derived from the packaged model file, kept between starts.

The packaged default runs the packaged file with int8 products (`int8_products`), a rewrite of
its graph that needs the `onnx` package, whose import alone takes most of a second of a start.
The derived model is therefore kept in the user's cache directory, named by the rewrite's
version and the source file's sha256, with the derived file's own sha256 beside it: the next
start loads that copy without importing `onnx`, and a copy that does not match its digest (a
disk fault, a write cut short) is derived again. Where the directory cannot be written (a
read-only home in a locked-down container), each start derives the model in memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

import platformdirs

logger = logging.getLogger("mneme.embedding")

CACHE_DIR = Path(platformdirs.user_cache_dir("mneme")) / "models"
"""Where derived models are kept between starts."""

INT8_PRODUCTS_VERSION = 1
"""The version of `int8_products`' rewrite, in the kept copy's name: raise it whenever the
rewrite changes what it derives, so no start reads a copy derived by an older one."""


def int8_products_model(model_path: Path, cache_dir: Path = CACHE_DIR) -> Path | bytes:
    """The model at `model_path` with int8 products, for onnxruntime: the path of the copy kept
    in `cache_dir` when one was derived from this very file by this rewrite and is intact, else
    the model derived now (and kept there, when the directory can be written)."""
    source_digest = _sha256(model_path.read_bytes())
    name = f"{model_path.stem}-int8-products-v{INT8_PRODUCTS_VERSION}-{source_digest}"
    kept, digest_file = cache_dir / f"{name}.onnx", cache_dir / f"{name}.sha256"
    try:
        if digest_file.read_text().strip() == _sha256(kept.read_bytes()):
            return kept
    except OSError:
        pass
    # Imported here: only deriving needs onnx.
    from service.providers.int8_products import with_int8_products

    derived = with_int8_products(model_path)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        _write_atomically(kept, derived)
        _write_atomically(digest_file, _sha256(derived).encode())
    except OSError as exc:
        logger.info("could not keep the derived embedding model in %s: %s", cache_dir, exc)
    return derived


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _write_atomically(path: Path, content: bytes) -> None:
    """`content` at `path`, all of it or nothing (processes starting together may race)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
