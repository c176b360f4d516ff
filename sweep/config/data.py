"""The `data` section of a search space (and of a donor that trains on other data): which dataset, how split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.config.errors import SpecError
from sweep.config.fields import Option, Section, by_key
from sweep.registry import DATASETS

OPTIONS = by_key(
    (
        Option("dataset", "string", choices=lambda: DATASETS),
        Option("train_size", "integer", None, low=1, nullable=True, doc="null: every pool image not in val"),
        Option("val_size", "integer", 1000, low=0, cap="a fifth of the training pool"),
        Option("test_size", "integer", None, low=1, nullable=True, doc="the first N official test images; null: all"),
    )
)
# Where the data lives, not what it is (the sweep's data section only; part of no identity).
SOURCE_OPTIONS = by_key(
    (
        Option("root", "string", None, nullable=True, doc="null: $STITCHSWEEP_DATA, else ~/.cache/stitchsweep/data"),
        Option("download", "bool", True),
    )
)
DATA_FIELDS = set(OPTIONS)


@dataclass(frozen=True, kw_only=True)
class DataSpec:
    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None

    def fields(self) -> dict:
        """dataset, train_size, val_size, test_size: the fields a trial or unit copies from its data."""
        return {
            "dataset": self.dataset,
            "train_size": self.train_size,
            "val_size": self.val_size,
            "test_size": self.test_size,
        }

    def sizes(self) -> tuple[int, int]:
        """(training images, test images) this spec takes."""

        info = DATASETS[self.dataset]
        return (self.train_size or info.train_pool - self.val_size, min(self.test_size or info.test, info.test))


def parse_data(raw: object, path: str, root: str | None, download: bool, extra: set[str] = frozenset()) -> DataSpec:
    """Validate a data mapping against the registered dataset's sizes (and its files when download is off)."""

    d = Section(raw, path, DATA_FIELDS | set(extra))
    dataset = d.read(OPTIONS["dataset"])
    info = DATASETS[dataset]
    data = DataSpec(
        dataset=dataset,
        train_size=d.read(OPTIONS["train_size"]),
        val_size=d.read(OPTIONS["val_size"], default=OPTIONS["val_size"].capped(info.train_pool // 5)),
        test_size=d.read(OPTIONS["test_size"], high=info.test),
    )
    if not download:  # (a dataset that is never downloaded is looked for at `run`, before any unit)
        missing = info.missing_files(Path(root) if root else None)
        if missing:
            raise SpecError(
                f"{path}.root" if path == "data" else f"{path}.dataset",
                f"the {dataset} files under the data root (download is off)",
                f"{len(missing)} missing, e.g. {missing[0]}",
                "set data.download: true once, or copy the dataset there"
                if info.downloadable
                else f"{dataset} is never downloaded: copy it there",
            )
    if data.val_size + (data.train_size or 0) > info.train_pool:
        field = f"{path}.train_size" if data.train_size else f"{path}.val_size"
        raise SpecError(
            field,
            f"train_size + val_size at most the {info.train_pool} training images of {dataset}",
            data.val_size + (data.train_size or 0),
        )
    if data.val_size >= info.train_pool:
        raise SpecError(
            f"{path}.val_size", f"fewer than the {info.train_pool} training images of {dataset}", data.val_size
        )
    return data
