"""Checks on the local files a run reads, done before any model is loaded.

The trainer never downloads: a model is a local directory. The commonest ways
such a directory is wrong are a path that is not there and a clone made
without Git LFS, whose weight files are small text pointers; both get a
message that says what to do.
"""

from pathlib import Path

from .errors import TrainerError

LFS_HEADER = b"version https://git-lfs.github.com/spec/v1"
# Pointer files are about 130 bytes; nothing real that small is a weight file.
LFS_POINTER_MAX_BYTES = 1024
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def is_lfs_pointer(path):
    """True when the file at `path` is a Git LFS pointer rather than its content."""
    path = Path(path)
    try:
        if path.stat().st_size > LFS_POINTER_MAX_BYTES:
            return False
        with open(path, "rb") as f:
            return f.read(len(LFS_HEADER)) == LFS_HEADER
    except OSError:
        return False


def check_model_dir(path, field):
    """Make sure `path` is a local Hugging Face model directory with real
    weight files; raise TrainerError naming `field` otherwise."""
    path = Path(path)
    if not path.exists():
        if path.is_symlink():
            raise TrainerError(f"{field}: {path} is a broken symbolic link")
        raise TrainerError(
            f"{field}: {path} does not exist (the trainer reads models from local "
            "directories only and never downloads)")
    if not path.is_dir():
        raise TrainerError(f"{field}: {path} is not a directory")
    if not (path / "config.json").is_file():
        if (path / "adapter_config.json").is_file():
            raise TrainerError(
                f"{field}: {path} holds a PEFT adapter, not a full model; give the "
                "directory of the model the adapter was trained on")
        raise TrainerError(f"{field}: {path} has no config.json, so it is not a Hugging Face model directory")
    pointers = sorted(f.name for f in path.iterdir() if f.is_file() and is_lfs_pointer(f))
    if pointers:
        raise TrainerError(
            f"{field}: {', '.join(pointers)} in {path} "
            + ("is a Git LFS pointer" if len(pointers) == 1 else "are Git LFS pointers")
            + ", not the file itself; run `git lfs pull` in that directory")
    if not any(f.suffix in WEIGHT_SUFFIXES for f in path.iterdir() if f.is_file()):
        raise TrainerError(f"{field}: {path} has no weight files (*.safetensors or *.bin)")
    return path


def check_data_file(path, field):
    """Make sure a data file exists, is a regular file and is not an LFS pointer."""
    path = Path(path)
    if not path.exists():
        raise TrainerError(f"{field}: {path} does not exist")
    if not path.is_file():
        raise TrainerError(f"{field}: {path} is not a regular file")
    if is_lfs_pointer(path):
        raise TrainerError(f"{field}: {path} is a Git LFS pointer, not the data itself; run `git lfs pull`")
    return path
