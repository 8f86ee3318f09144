"""Canned agent answers, taken from the bundled cassette so tests and demo agree."""
import json

from django.conf import settings

_CASSETTE = json.loads(settings.AITEAM_REPLAY_CASSETTE.read_text())["interactions"]


def answer(role: str, index: int = 0) -> dict:
    return [i["tool_input"] for i in _CASSETTE if i["role"] == role][index]


PO_CLEAR = answer("product_owner")
BA_STORIES = answer("business_analyst")
