"""Who uses what: the links between a commit's files, built once per index and reused by every ranking.

File A links to file B for each name A uses that B defines, weighted by the square root of how often A uses it
(as in Aider's repository map). Names defined in many files (`get`, `save`) say little about which one is meant:
past MANY_DEFINERS files they weigh a tenth, past MAX_DEFINERS they are left out. Private names weigh a tenth: they
tie a file to its own package, not to what a ticket is about. Dunder methods link nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from agents.repo.index import RepoIndex

MAX_DEFINERS = 20
MANY_DEFINERS = 5


@dataclass(frozen=True, slots=True)
class Links:
    nodes: list[str]  # the commit's paths, sorted; a file's node number is its place here
    src: np.ndarray  # the using file of each link
    dst: np.ndarray  # the defining file
    key: np.ndarray  # the link's (defining file, name) as a number into `keys`
    weight: np.ndarray  # before any focus: sqrt(uses) x the name's weight
    keys: list[tuple[str, str]]


def links_of(index: RepoIndex) -> Links:
    nodes = sorted(index.paths)
    at = {path: i for i, path in enumerate(nodes)}
    definers: dict[str, set[str]] = {}
    for symbol in index.symbols:
        if not (symbol.name.startswith("__") and symbol.name.endswith("__")):
            definers.setdefault(symbol.name, set()).add(symbol.path)
    src, dst, keys, weights, key_id = [], [], [], [], {}
    for user, names in index.references.items():
        for name, count in names.items():
            places = definers.get(name)
            if not places or len(places) > MAX_DEFINERS:
                continue
            weight = math.sqrt(count) * name_weight(name, len(places))
            for place in places - {user}:
                src.append(at[user])
                dst.append(at[place])
                keys.append(key_id.setdefault((place, name), len(key_id)))
                weights.append(weight)
    return Links(nodes, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(keys, dtype=np.int64),
                 np.array(weights, dtype=np.float64), list(key_id))


def name_weight(name: str, definer_count: int) -> float:
    weight = 0.1 if name.startswith("_") else 1.0
    return weight * 0.1 if definer_count > MANY_DEFINERS else weight
