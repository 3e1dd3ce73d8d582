"""What a run's configuration names: keys, the classes of its ``_target_`` s, the dataset kinds a method
trains on and the ``conf/`` names of methods and datasets, for the checks of this package."""
from __future__ import annotations

import numbers
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lightning_modules.shared.registry import ClassPathError, import_class
from textcore.checkout import CONF

ABSENT = object()  # a key the configuration does not have, unlike one set to null


def select(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def target_of(cfg: DictConfig, group: str) -> str | None:
    return select(cfg, f"{group}._target_")


def class_of(target: str | None) -> type | None:
    """The class a ``_target_`` names, or None (a target of the user's own that does not import is left
    to Hydra's instantiation, which names the problem)."""
    if not target:
        return None
    try:
        return import_class(target)
    except ClassPathError:
        return None


def data_kind_of(target: str | None) -> str | None:
    return getattr(class_of(target), "data_kind", None)


def method_class_of(cfg: DictConfig) -> type | None:
    cls = class_of(target_of(cfg, "method"))
    return cls if hasattr(cls, "trains_on") else None


def chosen_name(cfg: DictConfig, group: str) -> str:
    """What the user chose for ``group`` (``dataset=csv``, not the file name the csv config calls itself)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        choice = HydraConfig.get().runtime.choices.get(group)
        if choice:
            return str(choice)
    except (ImportError, ValueError):  # not inside a Hydra run (tests, notebooks)
        pass
    return str(select(cfg, f"{group}.name") or target_of(cfg, group) or group)


def yaml_configs(group: str) -> dict[str, dict]:
    """``conf/<group>/<name>.yaml`` as plain dicts (a ``_global_`` dataset file's ``dataset`` subtree),
    each merged over the files of its ``defaults`` list."""
    raw = {}
    for path in sorted((CONF / group).glob("*.yaml")):
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
        if "_target_" not in data and isinstance(data.get(group), dict):
            data = {**data[group], "defaults": data.get("defaults", [])}
        raw[path.stem] = data

    def merged(name: str, seen: tuple = ()) -> dict:
        data = dict(raw.get(name, {}))
        out: dict = {}
        for parent in data.pop("defaults", None) or []:
            if isinstance(parent, str) and parent in raw and parent not in seen:
                out.update(merged(parent, seen + (name,)))
        out.update(data)
        return out

    return {name: merged(name) for name in raw}


def datasets_for(method_target: str) -> list[str]:
    """Names of the dataset configs a method trains on (``conf/dataset``)."""
    kinds = getattr(class_of(method_target), "trains_on", ())
    return [name for name, data in yaml_configs("dataset").items() if data_kind_of(data.get("_target_")) in kinds]


def method_names() -> dict[str, str]:
    """Method class path -> its ``method=`` name (``conf/method``). Where several configs share a class
    (``promptbert`` is SimCSE with templates), the config that does not inherit another one names it."""
    names: dict[str, str] = {}
    for name, data in yaml_configs("method").items():
        target = data.get("_target_")
        if not target:
            continue
        parents = OmegaConf.load(CONF / "method" / f"{name}.yaml").get("defaults") or []
        inherits = any(isinstance(parent, str) and (CONF / "method" / f"{parent}.yaml").is_file() for parent in parents)
        if target not in names or not inherits:
            names[target] = data.get("name", name)
    return names
