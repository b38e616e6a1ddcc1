"""verl's interaction YAML: the shipped example loads, names default from the class, and every mistake names the
file and the entry."""

import textwrap
from pathlib import Path

import pytest

from verl.interactions import BaseInteraction, Gsm8kInteraction, initialize_interactions_from_config
from verl.interactions.utils.interaction_registry import default_interaction_name

ROOT = Path(__file__).resolve().parents[3]


def _yaml(tmp_path, text):
    path = tmp_path / "interactions.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_the_shipped_example_loads():
    interactions = initialize_interactions_from_config(
        ROOT / "examples" / "agent_loop" / "interaction_configs" / "gsm8k_interaction.yaml"
    )
    assert list(interactions) == ["gsm8k"] and isinstance(interactions["gsm8k"], Gsm8kInteraction)
    assert interactions["gsm8k"].config == {"name": "gsm8k"}


def test_names_and_configs(tmp_path):
    path = _yaml(
        tmp_path,
        """
        interaction:
          - class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction
          - name: critic
            class_name: verl.interactions.base.BaseInteraction
            config: {strictness: 2}
        """,
    )
    interactions = initialize_interactions_from_config(path)
    assert list(interactions) == ["gsm8k", "critic"]
    assert interactions["critic"].config == {"strictness": 2, "name": "critic"}
    assert interactions["critic"].name == "critic"


@pytest.mark.parametrize(
    "class_name, name",
    [
        ("a.b.Gsm8kInteraction", "gsm8k"),
        ("a.b.BaseInteraction", "base"),
        ("a.Tutor", "tutor"),
        ("a.Interaction", "interaction"),
    ],
)
def test_default_names(class_name, name):
    assert default_interaction_name(class_name) == name


@pytest.mark.parametrize(
    "body, error, message",
    [
        ("interactions: []\n", ValueError, r"needs a top-level 'interaction:' list"),
        ("interaction:\n  - name: x\n", ValueError, r"interaction\[0\]: each entry needs class_name"),
        (
            "interaction:\n  - class_name: nowhere.Thing\n",
            ModuleNotFoundError,
            r"interaction\[0\]: class_name 'nowhere.Thing': there is no module 'nowhere'",
        ),
        (
            "interaction:\n  - class_name: verl.interactions.base.Base\n",
            ImportError,
            r"interaction\[0\]: module 'verl.interactions.base' defines no class 'Base'",
        ),
        (
            "interaction:\n  - class_name: verl.tools.calculator_tool.CalculatorTool\n",
            TypeError,
            r"interaction\[0\]: verl.tools.calculator_tool.CalculatorTool is not a verl.interactions.base.BaseInteraction",
        ),
        (
            "interaction:\n  - class_name: verl.interactions.base.BaseInteraction\n    cfg: {}\n",
            ValueError,
            r"interaction\[0\]: unknown keys \['cfg'\]",
        ),
        (
            "interaction:\n  - {name: u, class_name: verl.interactions.base.BaseInteraction}\n"
            "  - {name: u, class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction}\n",
            ValueError,
            r"Duplicate interaction name 'u' found in .* \(interaction\[0\] and interaction\[1\]\): give each entry a unique name",
        ),
    ],
)
def test_a_bad_interaction_yaml_names_the_file_and_entry(tmp_path, body, error, message):
    path = _yaml(tmp_path, body)
    with pytest.raises(error, match=message) as info:
        initialize_interactions_from_config(path)
    assert path in str(info.value)


def test_a_missing_file_names_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="multi_turn.interaction_config_path"):
        initialize_interactions_from_config(tmp_path / "none.yaml")


def test_the_base_class_is_exported():
    assert issubclass(Gsm8kInteraction, BaseInteraction)
