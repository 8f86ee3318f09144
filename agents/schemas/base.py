"""Agent inputs (contexts) and outputs (what the model must return) are pydantic models.

Outputs forbid extra fields and carry the limits a reviewer would expect, so an answer
that would need hand-fixing fails validation and goes through the repair loop instead.
"""
from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
