"""What SARIF 2.1.0 asks of a document copilot-logs writes (the OASIS standard's required
properties, and GitHub code scanning's: a rule for every result, by id and index), checked
the same way for validate and diff."""

from __future__ import annotations

from typing import Any

LEVELS = {"none", "note", "warning", "error"}


def check_sarif(document: Any) -> list[dict[str, Any]]:
    """Assert the document is SARIF 2.1.0 as copilot-logs writes it; returns its results."""
    assert document["version"] == "2.1.0"
    assert document["$schema"].endswith("sarif-2.1.0.json")
    [sarif_run] = document["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "copilot-logs" and driver["version"]
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert len(set(rule_ids)) == len(rule_ids)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] in LEVELS
    results = sarif_run["results"]
    assert isinstance(results, list)
    for item in results:
        assert rule_ids[item["ruleIndex"]] == item["ruleId"]
        assert item["level"] in LEVELS
        assert item["message"]["text"]
        for location in item.get("locations", []):
            physical = location["physicalLocation"]
            assert physical["artifactLocation"]["uri"]
            if "region" in physical:
                assert physical["region"]["startLine"] >= 1
    return list(results)
