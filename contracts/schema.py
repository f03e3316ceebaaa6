"""JSON Schema for every event type, for producers that are not written in Python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contracts.events import EVENT_MODELS, SCHEMA_VERSION


def event_schemas() -> dict[str, dict[str, Any]]:
    schemas: dict[str, dict[str, Any]] = {}
    for event_type, model in EVENT_MODELS.items():
        schema = model.model_json_schema()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"urn:redstring:event:{event_type}:v{SCHEMA_VERSION}"
        schema["description"] = (
            model.__doc__ or ""
        ).strip() or f"{event_type} envelope; Kafka key = tenant_id (UTF-8)."
        schemas[event_type] = schema
    return schemas


def export_schemas(directory: Path) -> list[Path]:
    """Write ``<EventType>.schema.json`` for each event type; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for event_type, schema in event_schemas().items():
        path = directory / f"{event_type}.schema.json"
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
