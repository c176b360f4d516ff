"""The `data` section of a search space (and of a donor that trains on other data): which dataset, how split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.config.errors import SpecError
from sweep.config.fields import Section
from sweep.registry import DATASETS

DATA_FIELDS = {"dataset", "train_size", "val_size", "test_size"}


@dataclass(frozen=True, kw_only=True)
class DataSpec:
    dataset: str
    train_size: int | None
    val_size: int
    test_size: int | None

    def sizes(self) -> tuple[int, int]:
        """(training images, test images) this spec takes."""

        info = DATASETS[self.dataset]
        return (self.train_size or info.train_pool - self.val_size, min(self.test_size or info.test, info.test))


def parse_data(raw: object, path: str, root: str | None, download: bool, extra: set[str] = frozenset()) -> DataSpec:
    """Validate a data mapping against the registered dataset's sizes (and its files when download is off)."""

    d = Section(raw, path, DATA_FIELDS | set(extra))
    dataset = d.get("dataset", "string", choices=sorted(DATASETS))
    info = DATASETS[dataset]
    data = DataSpec(
        dataset=dataset,
        train_size=d.get("train_size", "integer", None, low=1, nullable=True),
        val_size=d.get("val_size", "integer", min(1000, info.train_pool // 5), low=0),
        test_size=d.get("test_size", "integer", None, low=1, high=info.test, nullable=True),
    )
    if not download:
        missing = DATASETS[dataset].missing_files(Path(root) if root else None)
        if missing:
            raise SpecError(
                f"{path}.root" if path == "data" else f"{path}.dataset",
                f"the {dataset} files under the data root (download is off)",
                f"{len(missing)} missing, e.g. {missing[0]}",
                "set data.download: true once, or copy the dataset there",
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
