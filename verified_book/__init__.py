"""The engine of a verified book: it knows no book, only how to check one.

A book's author imports from here and nowhere else in the engine:

- declaring claims: `claim`, `InvariantFailed`, `NotOnBackend`, `ID_PATTERN` (a claim id's form);
- beside a claim, a premise of its source it disputes and why a figure resting on one stands:
  `disputes_premise`, `excuse`;
- the inputs a claim reads, recorded with their file and line: `given`, `vendor`, `exact`, `table`,
  `model_config`, `model_config_all`, `setting`, `GIVEN` (the given inputs' file);
- the catalogue of real devices a range or a supposed device is held to: `Device`, `devices`, `device`,
  `span`, `check_range`, `match_device`;
- libraries imported when a claim needs them: `lazy_import`;
- the backends a claim computes on: `Backend`, `Adapter` (what every library's adapter does), `NAMES`,
  `names_of`, `available`;
- figures a snippet prints: `snippet_figure`, `snippet_holds`;
- this machine: `Machine`, `fingerprint` (the machine's), `identify`, `profiles`, `usable_cpus`;
- a book's own plots: `ResultsFile`, `number`, `GeneratedPage`, `remembered`.

Everything else in the package is the engine's own and may change. Each name is imported from its
module when first asked for, so `import verified_book` costs nothing: no pytest, no MkDocs, no
array library. The engine's layers (`pyproject.toml`, `[tool.importlinter]`) sit below this module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verified_book.authoring.catalogue import Device, check_range, device, devices, match_device, span
    from verified_book.authoring.inputs import (
        GIVEN,
        exact,
        given,
        model_config,
        model_config_all,
        setting,
        table,
        vendor,
    )
    from verified_book.authoring.lazy import lazy_import
    from verified_book.authoring.registry import InvariantFailed, NotOnBackend, claim, disputes_premise, excuse
    from verified_book.backends import NAMES, Adapter, Backend, available, names_of
    from verified_book.engine.machine import Machine, fingerprint, identify, profiles, usable_cpus
    from verified_book.engine.snippet_figures import snippet_figure, snippet_holds
    from verified_book.records.results import ResultsFile
    from verified_book.site.plot_cache import remembered
    from verified_book.site.render import GeneratedPage, number
    from verified_book.vocabulary import ID_PATTERN

#: each public name and the module it lives in
_WHERE = {
    "claim": "verified_book.authoring.registry",
    "InvariantFailed": "verified_book.authoring.registry",
    "NotOnBackend": "verified_book.authoring.registry",
    "disputes_premise": "verified_book.authoring.registry",
    "excuse": "verified_book.authoring.registry",
    "ID_PATTERN": "verified_book.vocabulary",
    "given": "verified_book.authoring.inputs",
    "vendor": "verified_book.authoring.inputs",
    "exact": "verified_book.authoring.inputs",
    "table": "verified_book.authoring.inputs",
    "model_config": "verified_book.authoring.inputs",
    "model_config_all": "verified_book.authoring.inputs",
    "setting": "verified_book.authoring.inputs",
    "GIVEN": "verified_book.authoring.inputs",
    "lazy_import": "verified_book.authoring.lazy",
    "Device": "verified_book.authoring.catalogue",
    "devices": "verified_book.authoring.catalogue",
    "device": "verified_book.authoring.catalogue",
    "span": "verified_book.authoring.catalogue",
    "check_range": "verified_book.authoring.catalogue",
    "match_device": "verified_book.authoring.catalogue",
    "Backend": "verified_book.backends",
    "Adapter": "verified_book.backends",
    "NAMES": "verified_book.backends",
    "names_of": "verified_book.backends",
    "available": "verified_book.backends",
    "snippet_figure": "verified_book.engine.snippet_figures",
    "snippet_holds": "verified_book.engine.snippet_figures",
    "Machine": "verified_book.engine.machine",
    "fingerprint": "verified_book.engine.machine",
    "identify": "verified_book.engine.machine",
    "profiles": "verified_book.engine.machine",
    "usable_cpus": "verified_book.engine.machine",
    "ResultsFile": "verified_book.records.results",
    "number": "verified_book.site.render",
    "GeneratedPage": "verified_book.site.render",
    "remembered": "verified_book.site.plot_cache",
}

__all__ = [
    "GIVEN",
    "ID_PATTERN",
    "NAMES",
    "Adapter",
    "Backend",
    "Device",
    "GeneratedPage",
    "InvariantFailed",
    "Machine",
    "NotOnBackend",
    "ResultsFile",
    "available",
    "check_range",
    "claim",
    "device",
    "devices",
    "disputes_premise",
    "exact",
    "excuse",
    "fingerprint",
    "given",
    "identify",
    "lazy_import",
    "match_device",
    "model_config",
    "model_config_all",
    "names_of",
    "number",
    "profiles",
    "remembered",
    "setting",
    "snippet_figure",
    "snippet_holds",
    "span",
    "table",
    "usable_cpus",
    "vendor",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module when the name is first asked for (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
