"""Who acted: an agent role, a human (and from where), or a policy such as autonomous mode."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Actor:
    role: str = ""
    user: Any = None
    via: str = ""

    @classmethod
    def agent(cls, role: str) -> Actor:
        return cls(role=role, via="worker")

    @classmethod
    def human(cls, user: Any, via: str) -> Actor:
        return cls(user=user, via=via)

    @classmethod
    def policy(cls, name: str) -> Actor:
        return cls(role=name, via="policy")

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls(role=name, via="system")

    @property
    def is_human(self) -> bool:
        return self.user is not None

    def __str__(self) -> str:
        return getattr(self.user, "username", "") or self.role
