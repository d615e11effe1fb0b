"""The rules package holds together: every rule is declared once, in its family's module,
beside what finds it (a check or the reader's diagnostics), and the registry misses none."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest

import copilot_logs.commands.validate as package
from copilot_logs.commands import validate
from copilot_logs.commands.validate.rule import Family

FAMILY_MODULES = {
    "E": "envelope",
    "T": "turns",
    "X": "tools",
    "S": "subagents",
    "C": "completion",
    "R": "continuity",
}


def declared_families() -> dict[str, Family]:
    """Every Family object any module of the package defines, by module name."""
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Family):
                found[info.name] = value
    return found


def test_each_family_lives_in_its_own_module_and_the_registry_holds_them_all() -> None:
    families = declared_families()
    assert {name: family.letter for name, family in families.items()} == {
        module: letter for letter, module in FAMILY_MODULES.items()
    }
    declared = [
        rule for letter in validate.FAMILIES for rule in families[FAMILY_MODULES[letter]].rules
    ]
    assert list(validate.RULES) == declared
    for name, family in families.items():
        assert all(rule.code[0] == family.letter for rule in family.rules), name


def test_every_rule_has_exactly_one_way_to_be_found() -> None:
    catch_alls = []
    for rule in validate.RULES:
        if rule.check is not None:
            assert rule.diagnostics == (), rule.code
        elif not rule.diagnostics:
            catch_alls.append(rule.code)
    assert catch_alls == [validate.OTHER_DAMAGE]


def test_no_reader_kind_is_claimed_by_two_rules() -> None:
    kinds = [kind for rule in validate.RULES for kind in rule.diagnostics]
    assert len(kinds) == len(set(kinds)) == len(validate.DIAGNOSTIC_RULES)
    for kind, code in validate.DIAGNOSTIC_RULES.items():
        assert kind in validate.RULES_BY_CODE[code].diagnostics


@pytest.mark.parametrize(
    ("declared", "bad"),
    [
        ([], "T201"),  # another family's letter
        (["E101", "E102"], "E102"),  # declared twice
        (["E101", "E103"], "E102"),  # out of code order
    ],
)
def test_a_family_refuses_a_code_that_does_not_belong(declared: list[str], bad: str) -> None:
    family = Family("E")
    for code in declared:
        family.reported(code, f"rule-{code}", "error", "A rule.", "Why.", kinds=())
    with pytest.raises(ValueError, match=bad):
        family.reported(bad, "bad", "error", "A rule.", "Why.", kinds=())
    assert [rule.code for rule in family.rules] == declared


def test_the_decorator_keeps_the_check_a_plain_function() -> None:
    family = Family("T")

    @family.rule("T999", "a-rule", "info", "A rule.", "Why.")
    def finds(ctx: object) -> object:
        return ctx

    assert finds(1) == 1
    assert family.rules[0].check is finds
    # checks and rules cross to worker processes by reference
    for rule in validate.RULES:
        assert pickle.loads(pickle.dumps(rule)) == rule
        if rule.check is not None:
            assert pickle.loads(pickle.dumps(rule.check)) is rule.check
